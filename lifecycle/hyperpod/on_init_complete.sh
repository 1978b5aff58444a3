#!/usr/bin/env bash
# Entry point on Slurm clusters: LifeCycleConfig.OnInitComplete. HyperPod runs this once per node, as root, after it
# has configured its own software on the node. With the API-driven Slurm configuration (SlurmConfig on every
# instance group) HyperPod writes /opt/slurm/etc/slurm.conf, starts slurmctld on the controller and configless
# slurmd on login and compute nodes, and mounts FSx when InstanceStorageConfigs names it.
#
# So this script adds only what HyperPod does not do: instance metadata for root only (block_imds.sh), users, their SSH keys (kept in step with later changes to
# the users list by a timer, install_users_sync.sh), the container runtime's settings, Slurm
# log rotation, the node metrics collectors (when enabled, install_node_metrics.sh),
# and (controller) the settings Studio login nodes read. It never writes node or partition lines,
# never starts, stops or restarts a Slurm daemon; after changing plugstack.conf the controller runs
# `scontrol reconfigure`, which pushes the file to the configless slurmd daemons.
set -euo pipefail

# This script's directory, as dirname would print it (without starting one: see lib/common.sh).
HERE="${BASH_SOURCE[0]%/*}"
[[ "$HERE" != "${BASH_SOURCE[0]}" ]] || HERE=. # run as `bash x.sh` from its own directory
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$HERE/lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=lib/verify.sh
source "$HERE/lib/verify.sh"
start_log on_init_complete

log "parameters: $PARAMS_FILE, resource config: $RESOURCE_CONFIG"
# Nothing below runs unless every script here and the parameters are the deploy's (lib/verify.sh).
step verify_lifecycle_record verify_download "$HERE" "$PARAMS_FILE"
# The keys this script reads, in one Python start (a file it cannot read: the validation step below says why, and
# `param` reads each key on its own). An EKS file is no Slurm file: say which entry point it is for before the check
# refuses its keys.
params orchestrator node_metrics.remote_write_url slurm.login_secret_arn slurm.auth slurm.client_bundle_s3_prefix 2>/dev/null || true
if [[ "$(param orchestrator)" == eks ]]; then
  die "on_init_complete.sh is the Slurm entry point; EKS groups run on_create.sh (OnCreate)"
fi
step validate_parameters validate_params "$PARAMS_FILE"

read -ra addresses <<<"$(hostname -I)"
detected="$(params_py node-type "$RESOURCE_CONFIG" "$PARAMS_FILE" "${addresses[@]}")"
NODE_TYPE="${detected%%$'\t'*}"
log "node type: $NODE_TYPE (instance group ${detected#*$'\t'})"
# Several controllers (HyperPod multi-head): every step below runs on each (they converge on the same files, keys and
# secret), except accounting, which writes to the one database and runs on the primary only (README.md, "Multi-head controllers").
CONTROLLER_ROLE=""
if [[ "$NODE_TYPE" == controller ]]; then
  if role="$(params_py controller-role "$RESOURCE_CONFIG" "$PARAMS_FILE" "${addresses[@]}")"; then
    CONTROLLER_ROLE="${role%%$'\t'*}"
    log "controller role: $CONTROLLER_ROLE (${role#*$'\t'})"
  else  # never two writers to the accounting database: the once-only steps wait for the users sync's next change
    CONTROLLER_ROLE=backup
    log "WARNING: cannot tell whether this controller is the primary (above); treating it as a backup"
  fi
fi

step block_imds bash "$HERE/block_imds.sh"          # before any user exists: instance credentials for root only
step mount_fsx bash "$HERE/mount_fsx.sh"           # lifecycle mount, or wait for HyperPod's own mount
# cluster.directory: SSSD before the users, so create_users.sh makes no local account the directory already has.
step configure_sssd bash "$HERE/configure_sssd.sh"
step create_users bash "$HERE/create_users.sh"        # homes on FSx once it is there
step setup_ssh_keys bash "$HERE/setup_ssh_keys.sh"      # passwordless SSH between nodes for cluster users
step install_users_sync bash "$HERE/install_users_sync.sh"  # later user changes reach this node through a systemd timer
step install_container_runtime bash "$HERE/install_container_runtime.sh"
step configure_slurm bash "$HERE/configure_slurm.sh" "$NODE_TYPE"
# observability.node_metrics: exporters and the Prometheus agent (only when the parameters carry node_metrics).
[[ -n "$(param node_metrics.remote_write_url)" ]] &&
  CONTROLLER_ROLE="$CONTROLLER_ROLE" step install_node_metrics bash "$HERE/install_node_metrics.sh" "$NODE_TYPE" "${detected#*$'\t'}"
# Slurm jobs' AWS credentials (the Slurm job role, MLflow only) from a root broker, on the nodes that run jobs.
[[ "$NODE_TYPE" != controller ]] && step install_job_credentials bash "$HERE/install_job_credentials.sh"
# Every user gets a Slurm association (slurm.conf may enforce them); departments, QoS and fair share when enabled.
# The one accounting database is written from the primary controller only.
[[ "$CONTROLLER_ROLE" == primary ]] && step apply_accounting bash "$HERE/apply_accounting.sh"

# DisableRootJobs (both modes) and, per-user mode (slurm.auth jwt), auth/jwt for Studio users, in slurm.conf's
# included file.
[[ "$NODE_TYPE" == controller ]] && step configure_slurm_auth bash "$HERE/configure_slurm_auth.sh"
# The controller holds the JWT key and the controller role: SSH there for administrators only.
[[ "$NODE_TYPE" == controller ]] && step configure_controller_ssh bash "$HERE/configure_controller_ssh.sh"
# pam_slurm_adopt: PrologFlags=Contain on the controller, the PAM stack on compute nodes (cluster.pam_slurm_adopt).
step configure_pam_adopt bash "$HERE/configure_pam_adopt.sh" "$NODE_TYPE"
# GPUs are GRES in HyperPod's slurm.conf; report nodes whose count differs from their instance type's.
[[ "$NODE_TYPE" == controller ]] && step check_gres bash "$HERE/check_gres.sh"
# Studio login nodes read the controller's Slurm version, address, slurm.conf (and, in shared mode only, the munge
# key) from this secret, and install the controller's own Slurm client from the bundle it names (sha256 included).
login_secret="$(param slurm.login_secret_arn)"
if [[ "$NODE_TYPE" == controller && -n "$login_secret" ]]; then
  SLURM_AUTH="$(param slurm.auth)" SLURM_CLIENT_BUNDLE_S3_PREFIX="$(param slurm.client_bundle_s3_prefix)" \
    step publish_slurm_login bash "$HERE/publish_slurm_login.sh" "$login_secret"
fi
