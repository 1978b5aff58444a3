#!/usr/bin/env bash
# Entry point on EKS-orchestrated clusters (LifeCycleConfig.OnCreate): HyperPod runs this once per node, as root.
# The node joins the EKS cluster by itself; pods mount FSx through the CSI driver and bring their users in their
# images. On the node: the parameters are checked, the node is named, and containerd's and kubelet's data move onto
# the instance group's EBS volume at /opt/sagemaker (eks_data_volume.sh, as AWS's EKS reference scripts do).
# Slurm clusters use on_init_complete.sh instead (see README.md, "Which hook, and who starts Slurm").
set -euo pipefail

# This script's directory, as dirname would print it (without starting one: see lib/common.sh).
HERE="${BASH_SOURCE[0]%/*}"
[[ "$HERE" != "${BASH_SOURCE[0]}" ]] || HERE=. # run as `bash x.sh` from its own directory
# shellcheck source-path=SCRIPTDIR source=lib/common.sh
source "$HERE/lib/common.sh"
# shellcheck source-path=SCRIPTDIR source=lib/verify.sh
source "$HERE/lib/verify.sh"
start_log on_create

log "parameters: $PARAMS_FILE, resource config: $RESOURCE_CONFIG"
# Nothing below runs unless every script here and the parameters are the deploy's (lib/verify.sh).
step verify_lifecycle_record verify_download "$HERE" "$PARAMS_FILE"
step validate_parameters validate_params "$PARAMS_FILE"
if [[ "$(param orchestrator)" != eks ]]; then
  die "on_create.sh is the EKS entry point; a Slurm cluster's groups must run on_init_complete.sh (OnInitComplete)"
fi
read -ra addresses <<<"$(hostname -I)"
detected="$(params_py node-type "$RESOURCE_CONFIG" "$PARAMS_FILE" "${addresses[@]}")"
log "node type: ${detected%%$'\t'*} (instance group ${detected#*$'\t'})"
step eks_data_volume bash "$HERE/eks_data_volume.sh"
