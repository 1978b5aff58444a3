"""Kubernetes objects the EKS stack applies, as plain dicts built from typed inputs (validated offline in tests)."""
from __future__ import annotations

FSX_CSI_DRIVER = "fsx.csi.aws.com"
FSX_CLAIM = "fsx-claim"
PLATFORM_LABEL = "hyperpod-platform"


def team_namespace(team: str) -> str:
    """The namespace HyperPod task governance gives a team."""
    return f"hyperpod-ns-{team}"


def namespace(name: str, platform: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {PLATFORM_LABEL: platform}}}


def fsx_volume(*, namespace: str, file_system_id: str, dns_name: str, mount_name: str, capacity_gib: int,
               platform: str) -> list[dict]:
    """A static PersistentVolume bound to exactly one `fsx-claim` in `namespace` (a PV binds one claim, so each
    namespace that mounts the file system gets its own PV with the same volume handle)."""
    volume_name = f"fsx-{namespace}"
    labels = {PLATFORM_LABEL: platform}
    return [
        {"apiVersion": "v1", "kind": "PersistentVolume",
         "metadata": {"name": volume_name, "labels": labels},
         "spec": {"capacity": {"storage": f"{capacity_gib}Gi"}, "volumeMode": "Filesystem",
                  "accessModes": ["ReadWriteMany"], "persistentVolumeReclaimPolicy": "Retain",
                  "storageClassName": "", "mountOptions": ["flock"],
                  "claimRef": {"namespace": namespace, "name": FSX_CLAIM},
                  "csi": {"driver": FSX_CSI_DRIVER, "volumeHandle": file_system_id,
                          "volumeAttributes": {"dnsname": dns_name, "mountname": mount_name}}}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
         "metadata": {"name": FSX_CLAIM, "namespace": namespace, "labels": labels},
         "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": volume_name,
                  "resources": {"requests": {"storage": f"{capacity_gib}Gi"}}}},
    ]


def resource_quota(*, namespace: str, resource: str, count: int, platform: str) -> dict:
    """Caps a team's accelerator requests at what Kueue could ever admit for it (guaranteed plus borrowable), so
    it never rejects a pod the scheduler would admit; it only stops pods that bypass the queue."""
    return {"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": "accelerators", "namespace": namespace, "labels": {PLATFORM_LABEL: platform}},
            "spec": {"hard": {f"requests.{resource}": str(count)}}}
