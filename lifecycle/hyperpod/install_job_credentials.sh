#!/usr/bin/env bash
# Login and compute nodes (where Slurm jobs run): the job credential broker (lib/job_credentials.py), so that a Slurm
# job's processes can call AWS as the Slurm job role (MLflow logging only, constructs/slurm_job_role.py), while every
# user's process outside a job, like every non-root process, gets no credentials at all (block_imds.sh).
#   - PLATFORM_DIR/job_credentials.py and hyperpod-job-credentials.service (root), which listens on
#     /run/hyperpod-job-credentials/broker.sock;
#   - AWS_JOB_CONFIG (/etc/hyperpod-platform/aws-config): profile slurm-job, whose credential_process asks the broker.
#     A job uses it with AWS_CONFIG_FILE=/etc/hyperpod-platform/aws-config AWS_PROFILE=slurm-job (README, "MLflow from
#     Slurm jobs").
# Parameters: job_credentials.role_arn and .region; none (MLflow off): an earlier installation is removed. Files are
# written only when they differ; systemd is reloaded and the broker restarted only then.
set -euo pipefail

# This script's directory, as dirname would print it (without starting one: see lib/common.sh).
HERE="${BASH_SOURCE[0]%/*}"
[[ "$HERE" != "${BASH_SOURCE[0]}" ]] || HERE=. # run as `bash x.sh` from its own directory
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$HERE/lib/common.sh"

SERVICE=hyperpod-job-credentials.service
AWS_JOB_CONFIG="${AWS_JOB_CONFIG:-/etc/hyperpod-platform/aws-config}"
BROKER_SOCKET="${BROKER_SOCKET:-/run/hyperpod-job-credentials/broker.sock}"

params job_credentials.role_arn job_credentials.region
role_arn="$(param job_credentials.role_arn)"
region="$(param job_credentials.region)"

if [[ -z "$role_arn" ]]; then
  if [[ -e "$SYSTEMD_DIR/$SERVICE" ]]; then
    systemctl disable --now "$SERVICE" || true
    rm -f "$SYSTEMD_DIR/$SERVICE" "$AWS_JOB_CONFIG" "$PLATFORM_DIR/job_credentials.py"
    systemctl daemon-reload
    log "job credentials are off: removed the broker"
  else
    log "job credentials are off (no MLflow): nothing to install"
  fi
  exit 0
fi
[[ "$role_arn" =~ ^arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]+$ ]] ||
  die "job_credentials.role_arn is not an IAM role ARN: '$role_arn'"
[[ "$region" =~ ^[a-z]{2}(-[a-z]+)+-[0-9]+$ ]] || die "job_credentials.region is not a region: '$region'"

# put SOURCE DEST MODE : installs SOURCE as DEST when they differ, and then sets WROTE=1.
WROTE=0
put() {
  local PARENT
  same_file "$1" "$2" && return 0
  parent_dir "$2"
  [[ -d "$PARENT" ]] || install -d -m 0755 "$PARENT"
  install -m "$3" "$1" "$2"
  WROTE=1
  log "wrote $2"
}

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
put "$HERE/lib/job_credentials.py" "$PLATFORM_DIR/job_credentials.py" 0755
write_text "$work/$SERVICE" <<UNIT
# Written by the HyperPod platform's install_job_credentials.sh.
[Unit]
Description=Slurm job credential broker: the Slurm job role for processes of running jobs only
After=network-online.target
Wants=network-online.target

[Service]
ExecStart=/usr/bin/python3 -S $PLATFORM_DIR/job_credentials.py serve --socket $BROKER_SOCKET --role-arn $role_arn --region $region
RuntimeDirectory=hyperpod-job-credentials
RuntimeDirectoryMode=0755
Restart=always
RestartSec=5

[Install]
WantedBy=multi-user.target
UNIT
put "$work/$SERVICE" "$SYSTEMD_DIR/$SERVICE" 0644
restart=$WROTE # the broker or its unit changed (the AWS config is read by each job, nothing to restart)
write_text "$work/aws-config" <<CONF
# Written by the HyperPod platform's install_job_credentials.sh: credentials for Slurm jobs only (the broker refuses
# every process that is not part of a running job on this node).
[profile slurm-job]
credential_process = /usr/bin/python3 -S $PLATFORM_DIR/job_credentials.py fetch --socket $BROKER_SOCKET
region = $region
CONF
put "$work/aws-config" "$AWS_JOB_CONFIG" 0644

if ((restart)) || ! systemctl is-active --quiet "$SERVICE"; then
  systemctl daemon-reload
  systemctl enable "$SERVICE"
  systemctl restart "$SERVICE"
  log "started $SERVICE ($role_arn)"
else
  log "$SERVICE is current"
fi
