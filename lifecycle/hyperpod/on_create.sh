#!/usr/bin/env bash
# Entry point: HyperPod runs this once per node, as root, from the downloaded lifecycle prefix.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$HERE/lib/common.sh"

mkdir -p "$LOG_DIR"
exec > >(tee -a "$LOG_DIR/on_create.log") 2>&1
TEE_PID=$!

finish() {
  local rc=$?
  if ((rc == 0)); then
    log "done"
  else
    log "FAILED with exit code $rc, see the lines above"
  fi
  # Close tee's input and wait, so the log is complete when HyperPod reads our exit code.
  exec >&- 2>&-
  wait "$TEE_PID" || true
  exit "$rc"
}
trap finish EXIT

log "parameters: $PARAMS_FILE, resource config: $RESOURCE_CONFIG"
params_py validate "$PARAMS_FILE"

read -ra addresses <<<"$(hostname -I)"
detected="$(params_py node-type "$RESOURCE_CONFIG" "$PARAMS_FILE" "${addresses[@]}")"
NODE_TYPE="${detected%%$'\t'*}"
log "node type: $NODE_TYPE (instance group ${detected#*$'\t'})"

# On EKS the node joins the cluster by itself; pods mount FSx through the CSI driver and bring their users in
# their images, so there is no Slurm, mount or user to set up here.
if [[ "$(param orchestrator)" == eks ]]; then
  log "orchestrator: eks, nothing else to configure on the node"
  exit 0
fi

bash "$HERE/mount_fsx.sh"
bash "$HERE/create_users.sh"
bash "$HERE/install_container_runtime.sh"
bash "$HERE/configure_slurm.sh" "$NODE_TYPE"

# Studio login nodes read the controller's Slurm version, address, slurm.conf and munge key from this secret.
login_secret="$(param slurm.login_secret_arn)"
if [[ "$NODE_TYPE" == controller && -n "$login_secret" ]]; then
  bash "$HERE/publish_slurm_login.sh" "$login_secret"
fi
