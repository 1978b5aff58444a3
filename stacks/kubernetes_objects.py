"""Kubernetes objects the EKS stack applies, as plain dicts built from typed inputs (validated offline in tests)."""
from __future__ import annotations

FSX_CSI_DRIVER = "fsx.csi.aws.com"
FSX_CLAIM = "fsx-claim"          # the team's own directory, read-write
DATASETS_CLAIM = "fsx-datasets"  # the shared datasets directory, read-only
PLATFORM_LABEL = "hyperpod-platform"


def team_namespace(team: str) -> str:
    """The namespace HyperPod task governance gives a team."""
    return f"hyperpod-ns-{team}"


# Pod Security admission (built into Kubernetes since 1.25): `baseline` refuses privileged, hostPath, host
# namespaces and added capabilities, which would otherwise let any namespace writer become root on a node.
# `restricted` is only warned about and audited: training images commonly run as root inside the container.
POD_SECURITY_LABELS = {"pod-security.kubernetes.io/enforce": "baseline",
                       "pod-security.kubernetes.io/enforce-version": "latest",
                       "pod-security.kubernetes.io/warn": "restricted",
                       "pod-security.kubernetes.io/audit": "restricted"}
JOB_ROLE = "hyperpod-job-submitter"


def team_group(team: str) -> str:
    """The Kubernetes group a team's access entry carries; RoleBindings in its namespace name it."""
    return f"hyperpod-team-{team}"


def namespace(name: str, platform: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {PLATFORM_LABEL: platform, **POD_SECURITY_LABELS}}}


def job_submitter_role(*, namespace: str, platform: str) -> dict:
    """What a team member needs to run the documented jobs in the team's namespace, and to see them run: no
    secrets, no RBAC, no bare pods or deployments (work goes through the job CRDs, so through Kueue)."""
    read = ["get", "list", "watch"]
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": JOB_ROLE, "namespace": namespace, "labels": {PLATFORM_LABEL: platform}},
            "rules": [
                {"apiGroups": ["sagemaker.amazonaws.com"], "resources": ["hyperpodpytorchjobs"],
                 "verbs": [*read, "create", "delete", "patch", "update"]},
                {"apiGroups": ["sagemaker.amazonaws.com"], "resources": ["hyperpodpytorchjobs/status"], "verbs": read},
                {"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs", "mpijobs"],
                 "verbs": [*read, "create", "delete", "patch", "update"]},
                {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads", "localqueues"], "verbs": read},
                {"apiGroups": [""], "resources": ["pods", "pods/log", "events", "services",
                                                  "persistentvolumeclaims", "configmaps"], "verbs": read},
            ]}


def role_binding(*, namespace: str, group: str, role: str, platform: str) -> dict:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": f"{role}-{group}"[:63], "namespace": namespace, "labels": {PLATFORM_LABEL: platform}},
            "subjects": [{"kind": "Group", "name": group, "apiGroup": "rbac.authorization.k8s.io"}],
            "roleRef": {"kind": "Role", "name": role, "apiGroup": "rbac.authorization.k8s.io"}}


def fsx_volume(*, namespace: str, claim: str, file_system_id: str, dns_name: str, mount_name: str, directory: str,
               capacity_gib: int, platform: str, read_only: bool = False) -> list[dict]:
    """A static PersistentVolume of one directory of the file system, bound to exactly one claim.

    The FSx CSI driver mounts `<dnsname>@tcp:/<mountname>` (kubernetes-sigs/aws-fsx-csi-driver v1.6.0,
    pkg/driver/node.go), so a mountname followed by a path mounts only that subdirectory: a pod sees its team's
    directory and nothing above it, whatever user it runs as. read_only adds the driver's `ro` mount option."""
    volume_name = f"fsx-{namespace}-{claim}"[:253]
    labels = {PLATFORM_LABEL: platform}
    modes = ["ReadOnlyMany"] if read_only else ["ReadWriteMany"]
    return [
        {"apiVersion": "v1", "kind": "PersistentVolume",
         "metadata": {"name": volume_name, "labels": labels},
         "spec": {"capacity": {"storage": f"{capacity_gib}Gi"}, "volumeMode": "Filesystem",
                  "accessModes": modes, "persistentVolumeReclaimPolicy": "Retain",
                  "storageClassName": "", "mountOptions": ["flock"],
                  "claimRef": {"namespace": namespace, "name": claim},
                  "csi": {"driver": FSX_CSI_DRIVER, "volumeHandle": f"{file_system_id}:{directory}",
                          "readOnly": read_only,
                          "volumeAttributes": {"dnsname": dns_name, "mountname": f"{mount_name}{directory}"}}}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
         "metadata": {"name": claim, "namespace": namespace, "labels": labels},
         "spec": {"accessModes": modes, "storageClassName": "", "volumeName": volume_name,
                  "resources": {"requests": {"storage": f"{capacity_gib}Gi"}}}},
    ]


def resource_quota(*, namespace: str, resource: str, count: int, platform: str, vcpu: int | None = None,
                   memory_gib: int | None = None) -> dict:
    """Caps a team's accelerator requests at what Kueue could ever admit for it (guaranteed plus borrowable), so
    it never rejects a pod the scheduler would admit; it only stops pods that bypass the queue. CPU and memory
    caps on requests bound what autoscaling may provision for the team (Karpenter sizes nodes by requests); a
    compute quota needs every pod to state requests, so default_requests goes with it."""
    hard = {f"requests.{resource}": str(count)}
    if vcpu is not None:
        hard["requests.cpu"] = str(vcpu)
    if memory_gib is not None:
        hard["requests.memory"] = f"{memory_gib}Gi"
    return {"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": "accelerators", "namespace": namespace, "labels": {PLATFORM_LABEL: platform}},
            "spec": {"hard": hard}}


ACCELERATOR_RESOURCES = ("nvidia.com/gpu", "aws.amazon.com/neurondevice", "aws.amazon.com/neuroncore",
                         "vpc.amazonaws.com/efa")


def zero_accelerator_quota(*, namespace: str, platform: str) -> dict:
    """No accelerator (or EFA) requests at all: workloads there cannot take GPUs around the team queues."""
    return {"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": "no-accelerators", "namespace": namespace, "labels": {PLATFORM_LABEL: platform}},
            "spec": {"hard": {f"requests.{r}": "0" for r in ACCELERATOR_RESOURCES}}}


def default_requests(*, namespace: str, platform: str) -> dict:
    """Requests for containers that state none, so a CPU/memory quota does not reject them outright."""
    return {"apiVersion": "v1", "kind": "LimitRange",
            "metadata": {"name": "default-requests", "namespace": namespace, "labels": {PLATFORM_LABEL: platform}},
            "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "250m", "memory": "512Mi"}}]}}
