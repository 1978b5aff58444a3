"""Kubernetes objects the EKS stack applies, as plain dicts built from typed inputs (validated offline in tests)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

FSX_CSI_DRIVER = "fsx.csi.aws.com"
FSX_CLAIM = "fsx-claim"  # the team's own directory, read-write
DATASETS_CLAIM = "fsx-datasets"  # the shared datasets directory, read-only
PLATFORM_LABEL = "hyperpod-platform"


def team_namespace(team: str) -> str:
    """The namespace HyperPod task governance gives a team."""
    return f"hyperpod-ns-{team}"


# Pod Security admission (built into Kubernetes since 1.25): `baseline` refuses privileged, hostPath, host
# namespaces and added capabilities, which would otherwise let any namespace writer become root on a node.
# `restricted` is only warned about and audited: training images commonly run as root inside the container.
POD_SECURITY_LABELS = {
    "pod-security.kubernetes.io/enforce": "baseline",
    "pod-security.kubernetes.io/enforce-version": "latest",
    "pod-security.kubernetes.io/warn": "restricted",
    "pod-security.kubernetes.io/audit": "restricted",
}
JOB_ROLE = "hyperpod-job-submitter"


def team_group(team: str) -> str:
    """The Kubernetes group a team's access entry carries; RoleBindings in its namespace name it."""
    return f"hyperpod-team-{team}"


def job_submitter_role(*, namespace: str, platform: str) -> dict:
    """What a team member needs to run the documented jobs in the team's namespace, and to see them run: the job
    kinds (each held to the member's own uid by manifests/team_identities.job_identity_policy), batch Jobs for
    evaluation, and the ConfigMaps jobs mount (AWS's team Role allows ConfigMap writes too: aws/sagemaker-hyperpod-cli
    @a00b22d helm_chart/HyperPodHelmChart/charts/team-role-and-bindings/templates/team-level-namespaced-role.yaml; the
    platform's own ConfigMaps there are guarded by team_identities.platform_config_guard). No secrets, no RBAC, no
    bare pods or deployments: work goes through the job kinds, so through Kueue and the job policies."""
    read = ["get", "list", "watch"]
    write = ["create", "delete", "patch", "update"]
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": JOB_ROLE, "namespace": namespace, "labels": {PLATFORM_LABEL: platform}},
        "rules": [
            {"apiGroups": ["sagemaker.amazonaws.com"], "resources": ["hyperpodpytorchjobs"], "verbs": read + write},
            {"apiGroups": ["sagemaker.amazonaws.com"], "resources": ["hyperpodpytorchjobs/status"], "verbs": read},
            {"apiGroups": ["kubeflow.org"], "resources": ["pytorchjobs", "mpijobs"], "verbs": read + write},
            {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": read + write},
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": read + write},
            {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads", "localqueues"], "verbs": read},
            {
                "apiGroups": [""],
                "resources": ["pods", "pods/log", "events", "services", "persistentvolumeclaims"],
                "verbs": read,
            },
        ],
    }


# Every job pod of a team runs as this service account of the team's namespace (manifests/training_jobs.py). With
# MLflow, EKS Pod Identity hands it the team's job role (one association per namespace and service account:
# https://docs.aws.amazon.com/eks/latest/userguide/pod-identities.html), and the ConfigMap below tells the job where
# the tracking server is.
JOB_SERVICE_ACCOUNT = "training-job"
MLFLOW_CONFIG_MAP = "mlflow"
MLFLOW_URI_KEY = "tracking-uri"


def job_service_account(*, namespace: str, platform: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": JOB_SERVICE_ACCOUNT, "namespace": namespace, "labels": {PLATFORM_LABEL: platform}},
    }


def mlflow_config_map(*, namespace: str, tracking_server_arn: str, platform: str) -> dict:
    """The tracking server's ARN, which the sagemaker-mlflow plugin accepts as MLFLOW_TRACKING_URI."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": MLFLOW_CONFIG_MAP, "namespace": namespace, "labels": {PLATFORM_LABEL: platform}},
        "data": {MLFLOW_URI_KEY: tracking_server_arn},
    }


def role_binding(*, namespace: str, group: str, role: str, platform: str) -> dict:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": f"{role}-{group}"[:63], "namespace": namespace, "labels": {PLATFORM_LABEL: platform}},
        "subjects": [{"kind": "Group", "name": group, "apiGroup": "rbac.authorization.k8s.io"}],
        "roleRef": {"kind": "Role", "name": role, "apiGroup": "rbac.authorization.k8s.io"},
    }


# The platform's node-readiness check (constructs/schedulable_node.py) authenticates as its own role, whose EKS access
# entry carries this group and nothing else: it may read nodes, no other object.
NODE_READER_GROUP = "hyperpod-platform-node-readers"


def node_reader_rbac(*, platform: str) -> list[dict]:
    name = NODE_READER_GROUP
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name, "labels": {PLATFORM_LABEL: platform}},
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": {PLATFORM_LABEL: platform}},
            "subjects": [{"kind": "Group", "name": NODE_READER_GROUP, "apiGroup": "rbac.authorization.k8s.io"}],
            "roleRef": {"kind": "ClusterRole", "name": name, "apiGroup": "rbac.authorization.k8s.io"},
        },
    ]


# Pods must not act as the node. What serves a HyperPod node its execution role's credentials is HyperPod's own
# `hyperpod-role-proxy-agent` ("proxies IAM role credentials for in-cluster workloads": awslabs/awsome-distributed-ai
# @95b939cd 1.architectures/5.sagemaker-hyperpod/tools/devops-agent/docs/hyperpod-mental-model.md); HyperPod's
# documentation says nothing of how, and its API has no instance metadata options (no IMDSv2 requirement, no hop limit:
# botocore's ClusterInstanceGroupSpecification), so the block cannot be made on the instance. It is made at the pod:
# an egress NetworkPolicy, enforced on each pod's interface by the VPC CNI's network policy agent
# (vpc-cni `enableNetworkPolicy`, stacks/eks_control_plane_stack.py), lets a pod reach every address but IPv4
# link-local 169.254.0.0/16: EC2's instance metadata at 169.254.169.254 and whatever else a node serves there
# (a credential proxy on another link-local address included). One address in it stays open, the EKS Pod Identity
# Agent (169.254.170.23), which hands a pod only the role of its own service account's association
# (https://docs.aws.amazon.com/eks/latest/userguide/pod-id-how-it-works.html). No IPv6 address is allowed at all (the
# cluster is IPv4), so fd00:ec2::254 is closed too. Host-network pods bypass it; Pod Security `baseline` refuses them
# in the namespaces this guards.
NODE_LINK_LOCAL = "169.254.0.0/16"
POD_IDENTITY_AGENT = "169.254.170.23/32"
NODE_CREDENTIALS_POLICY = "deny-node-credentials"


def deny_node_credentials(*, namespace: str, platform: str) -> dict:
    """Every pod of `namespace` may send to any pod and any IPv4 address except the node's link-local services."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": NODE_CREDENTIALS_POLICY, "namespace": namespace, "labels": {PLATFORM_LABEL: platform}},
        "spec": {
            "podSelector": {},
            "policyTypes": ["Egress"],
            "egress": [
                {
                    "to": [
                        {"ipBlock": {"cidr": "0.0.0.0/0", "except": [NODE_LINK_LOCAL]}},
                        {"ipBlock": {"cidr": POD_IDENTITY_AGENT}},
                        {"namespaceSelector": {}},
                    ]
                }
            ],
        },
    }


# Ingress into a team's pods: from the team's own pods (a job's workers rendezvous with each other: PyTorch's c10d
# TCPStore is unauthenticated and its elastic state unpickled, so another team's pod must not reach it) and from the
# platform's components that talk to job pods, named by the stack (the training operator's namespace, the observability
# collector's); nothing else, whatever namespace it runs in. Enforced by the VPC CNI's network policy agent like the
# egress guard above. Traffic from a node to its pods (kubelet probes) is not pod-to-pod and is not decided here
# (docs/eks.md says what an admin checks on the first job).
TEAM_INGRESS_POLICY = "team-ingress-only"


def team_ingress(*, namespace: str, platform_namespaces: Sequence[str], platform: str) -> dict:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": TEAM_INGRESS_POLICY, "namespace": namespace, "labels": {PLATFORM_LABEL: platform}},
        "spec": {
            "podSelector": {},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [
                        {"podSelector": {}},
                        {
                            "namespaceSelector": {
                                "matchExpressions": [
                                    {
                                        "key": "kubernetes.io/metadata.name",
                                        "operator": "In",
                                        "values": sorted(platform_namespaces),
                                    }
                                ]
                            }
                        },
                    ]
                }
            ],
        },
    }


# The FSx CSI driver passes a PersistentVolume's mountOptions to mount(8) (kubernetes-sigs/aws-fsx-csi-driver@01a89278
# pkg/driver/node.go NodePublishVolume: the volume capability's MountFlags). nosuid, nodev: a setuid binary or device
# file someone planted on FSx (root squash maps only uid 0; Studio root can still write as any other uid) does nothing
# in a pod; flock: POSIX locks work across nodes.
FSX_MOUNT_OPTIONS = ["flock", "nosuid", "nodev"]


def fsx_volume(
    *,
    namespace: str,
    claim: str,
    file_system_id: str,
    dns_name: str,
    mount_name: str,
    directory: str,
    capacity_gib: int,
    platform: str,
    read_only: bool = False,
) -> list[dict]:
    """A static PersistentVolume of one directory of the file system, bound to exactly one claim.

    The FSx CSI driver mounts `<dnsname>@tcp:/<mountname>` (kubernetes-sigs/aws-fsx-csi-driver v1.6.0,
    pkg/driver/node.go), so a mountname followed by a path mounts only that subdirectory: a pod sees its team's
    directory and nothing above it, whatever user it runs as. read_only adds the driver's `ro` mount option."""
    volume_name = f"fsx-{namespace}-{claim}"[:253]
    labels = {PLATFORM_LABEL: platform}
    modes = ["ReadOnlyMany"] if read_only else ["ReadWriteMany"]
    return [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": volume_name, "labels": labels},
            "spec": {
                "capacity": {"storage": f"{capacity_gib}Gi"},
                "volumeMode": "Filesystem",
                "accessModes": modes,
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": "",
                "mountOptions": list(FSX_MOUNT_OPTIONS),
                "claimRef": {"namespace": namespace, "name": claim},
                "csi": {
                    "driver": FSX_CSI_DRIVER,
                    "volumeHandle": f"{file_system_id}:{directory}",
                    "readOnly": read_only,
                    "volumeAttributes": {"dnsname": dns_name, "mountname": f"{mount_name}{directory}"},
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": claim, "namespace": namespace, "labels": labels},
            "spec": {
                "accessModes": modes,
                "storageClassName": "",
                "volumeName": volume_name,
                "resources": {"requests": {"storage": f"{capacity_gib}Gi"}},
            },
        },
    ]


def resource_quota(
    *, namespace: str, resource: str, count: int, platform: str, vcpu: int | None = None, memory_gib: int | None = None
) -> dict:
    """Caps a team's accelerator requests at what Kueue could ever admit for it (guaranteed plus borrowable), so
    it never rejects a pod the scheduler would admit; it only stops pods that bypass the queue. CPU and memory
    caps on requests bound what autoscaling may provision for the team (Karpenter sizes nodes by requests); a
    compute quota needs every pod to state requests, so default_requests goes with it."""
    hard = {f"requests.{resource}": str(count)}
    if vcpu is not None:
        hard["requests.cpu"] = str(vcpu)
    if memory_gib is not None:
        hard["requests.memory"] = f"{memory_gib}Gi"
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "accelerators", "namespace": namespace, "labels": {PLATFORM_LABEL: platform}},
        "spec": {"hard": hard},
    }


ACCELERATOR_RESOURCES = (
    "nvidia.com/gpu",
    "aws.amazon.com/neurondevice",
    "aws.amazon.com/neuroncore",
    "vpc.amazonaws.com/efa",
)


def zero_accelerator_quota(*, namespace: str, platform: str) -> dict:
    """No accelerator (or EFA) requests at all: workloads there cannot take GPUs around the team queues."""
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "no-accelerators", "namespace": namespace, "labels": {PLATFORM_LABEL: platform}},
        "spec": {"hard": {f"requests.{r}": "0" for r in ACCELERATOR_RESOURCES}},
    }


def default_requests(*, namespace: str, platform: str) -> dict:
    """Requests for containers that state none, so a CPU/memory quota does not reject them outright."""
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "default-requests", "namespace": namespace, "labels": {PLATFORM_LABEL: platform}},
        "spec": {"limits": [{"type": "Container", "defaultRequest": {"cpu": "250m", "memory": "512Mi"}}]},
    }


MAX_NAMESPACE_LIST = 4096  # characters of KUBE_NAMESPACES in the Studio lifecycle config


def studio_kube_settings(teams: Mapping[str, Sequence[str]], *, mlflow: bool) -> dict[str, str]:
    """The lifecycle config's settings for lifecycle/studio/eks_login_node.sh: each team namespace with its members
    (KUBE_NAMESPACES "hyperpod-ns-<team>=alice,carol ...": a space's profile picks its team's namespace as the
    kube context's default, a profile in no team `default`), and MLflow artifact uploads through presigned URLs."""
    namespaces = " ".join(
        f"{team_namespace(team)}={','.join(members)}" for team, members in sorted(teams.items()) if members
    )
    # The lifecycle config's content is at most 16 KB, base64: a platform with many members has each space ask the API
    # server for its own groups instead (kubectl auth whoami), which needs the API reachable at the space's start.
    if len(namespaces) <= MAX_NAMESPACE_LIST:
        environment = {"KUBE_NAMESPACES": namespaces}
    else:
        environment = {"KUBE_TEAM_GROUPS": f"{team_group('')}={team_namespace('')}"}
    if mlflow:
        environment["MLFLOW_PRESIGNED_UPLOADS"] = "true"
    return environment
