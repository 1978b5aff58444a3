#!/usr/bin/env bats
# install_job_credentials.sh: the job credential broker's files and unit on login and compute nodes (the broker itself
# runs against real Slurm and STS in tests/e2e/test_job_credentials.py).

load test_helper

ROLE="arn:aws:iam::111122223333:role/ml-cluster-slurm-job-us-east-1"

setup_file_env() {
  export AWS_JOB_CONFIG="$T/etc/hyperpod-platform/aws-config" BROKER_SOCKET="$T/run/broker.sock"
}

@test "on: broker, unit and the slurm-job profile written, the broker started; a second run changes nothing" {
  setup_file_env
  set_param job_credentials "{\"role_arn\": \"$ROLE\", \"region\": \"us-east-1\"}"
  run bash "$SCRIPTS/install_job_credentials.sh"
  [ "$status" -eq 0 ]
  cmp "$SCRIPTS/lib/job_credentials.py" "$PLATFORM_DIR/job_credentials.py"
  grep -qxF "ExecStart=/usr/bin/python3 -S $PLATFORM_DIR/job_credentials.py serve --socket $BROKER_SOCKET --role-arn $ROLE --region us-east-1" \
    "$SYSTEMD_DIR/hyperpod-job-credentials.service"
  grep -qxF "credential_process = /usr/bin/python3 -S $PLATFORM_DIR/job_credentials.py fetch --socket $BROKER_SOCKET" \
    "$AWS_JOB_CONFIG"
  grep -qxF "[profile slurm-job]" "$AWS_JOB_CONFIG"
  [ "$(calls systemctl | grep -v is-active)" = "$(printf '%s\n' "systemctl daemon-reload" \
    "systemctl enable hyperpod-job-credentials.service" "systemctl restart hyperpod-job-credentials.service")" ]
  : >"$STUB_LOG"
  STUB_ACTIVE_UNITS="hyperpod-job-credentials.service" run bash "$SCRIPTS/install_job_credentials.sh"
  [ "$status" -eq 0 ]
  [ "$(calls systemctl)" = "systemctl is-active --quiet hyperpod-job-credentials.service" ]
  [[ "$output" == *"hyperpod-job-credentials.service is current"* ]]
}

@test "off (no MLflow): nothing installed; turned off later, the broker and its profile are removed" {
  setup_file_env
  run bash "$SCRIPTS/install_job_credentials.sh"
  [ "$status" -eq 0 ]
  [[ "$output" == *"job credentials are off (no MLflow): nothing to install"* ]]
  [ ! -e "$SYSTEMD_DIR/hyperpod-job-credentials.service" ] && [ -z "$(calls systemctl)" ]
  set_param job_credentials "{\"role_arn\": \"$ROLE\", \"region\": \"us-east-1\"}"
  bash "$SCRIPTS/install_job_credentials.sh"
  set_param job_credentials null
  : >"$STUB_LOG"
  run bash "$SCRIPTS/install_job_credentials.sh"
  [ "$status" -eq 0 ]
  [ ! -e "$SYSTEMD_DIR/hyperpod-job-credentials.service" ] && [ ! -e "$AWS_JOB_CONFIG" ]
  [ ! -e "$PLATFORM_DIR/job_credentials.py" ]
  calls systemctl | grep -qx "systemctl disable --now hyperpod-job-credentials.service"
}

@test "a role ARN or region that is not one is refused before anything is written" {
  setup_file_env
  set_param job_credentials '{"role_arn": "arn:aws:iam::111122223333:role/x --region $(id)", "region": "us-east-1"}'
  run bash "$SCRIPTS/install_job_credentials.sh"
  [ "$status" -eq 1 ]
  [[ "$output" == *"job_credentials.role_arn is not an IAM role ARN"* ]]
  set_param job_credentials "{\"role_arn\": \"$ROLE\", \"region\": \"us-east-1; id\"}"
  run bash "$SCRIPTS/install_job_credentials.sh"
  [ "$status" -eq 1 ]
  [[ "$output" == *"job_credentials.region is not a region"* ]]
  [ ! -e "$SYSTEMD_DIR/hyperpod-job-credentials.service" ] && [ ! -e "$PLATFORM_DIR/job_credentials.py" ]
}
