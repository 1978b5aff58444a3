"""`cluster.accounting:` Slurm accounting for departments. Departments become Slurm accounts with their users'
associations, coordinators, fair share and the QoS they may use; `database` picks where slurmdbd stores it. The
rules: unique names, QoS that exist, users that exist, limits the compute groups can honour, and what an external
accounting database needs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, StrictBool

from platform_config.facts import nvidia_gpus
from platform_config.fields import Email, PosixName, Strict, pattern
from platform_config.network import private_subnet_az_ids

if TYPE_CHECKING:
    from platform_config.model import PlatformConfig

# Slurm lowercases account and QoS names (sacctmgr(1)); keep them plain so they are the same in every tool.
SlurmName = Annotated[
    str, pattern(r"[a-z][a-z0-9_-]{0,29}", "1-30 lowercase letters, digits, '_' and '-', starting with a letter")
]
# Passed to sacctmgr as one argument (Description=...): no commas, quotes or '=' that it could split on.
SlurmDescription = Annotated[
    str, pattern(r"[A-Za-z0-9 .:()/_-]{0,100}", "at most 100 letters, digits, spaces and .:()/_-")
]
# Slurm creates QoS `normal` itself and gives it to every association that names no other.
SLURM_DEFAULT_QOS = "normal"
# The account lifecycle/hyperpod/lib/accounting.py gives every user no department lists (USERS_ACCOUNT there).
PLATFORM_USERS_ACCOUNT = "hyperpod-users"


class Tres(Strict):
    """Trackable resources of a limit (sacctmgr TRES strings: cpu=N,node=N,gres/gpu=N). Unset means no limit."""

    cpu: int | None = Field(default=None, ge=1, description="CPUs.")
    node: int | None = Field(default=None, ge=1, description="Nodes; at most the compute groups' total.")
    gpu: int | None = Field(
        default=None,
        ge=1,
        description="GPUs (Slurm's gres/gpu); at most the compute groups' total (GPUs per instance "
        "type from config/facts/accelerators.json).",
    )

    def sacctmgr(self) -> str:
        parts = [("cpu", self.cpu), ("node", self.node), ("gres/gpu", self.gpu)]
        return ",".join(f"{k}={v}" for k, v in parts if v is not None)


class Qos(Strict):
    """A Slurm QoS: what one user may hold at once, what all its jobs together may hold, and its priority."""

    name: SlurmName = Field(description="The QoS's name. Defining normal sets Slurm's default QoS.")
    description: SlurmDescription = Field("", description="What the QoS is for (sacctmgr Description).")
    priority: int = Field(default=0, ge=0, le=1_000_000, description="The QoS's priority (sacctmgr Priority).")
    max_tres_per_user: Tres = Field(
        Tres(), description="What one user's jobs may hold at once (MaxTRESPerUser); no more than grp_tres."
    )
    grp_tres: Tres = Field(Tres(), description="What all the QoS's jobs together may hold (GrpTRES).")
    max_wall_minutes: int | None = Field(default=None, ge=1, le=525600, description="A job's longest run (MaxWall).")
    max_jobs_per_user: int | None = Field(
        default=None, ge=1, le=100000, description="Jobs one user may have running at once (MaxJobsPerUser)."
    )


class Department(Strict):
    """A Slurm account: its users' associations, who coordinates it, its fair share and the QoS it may use."""

    name: SlurmName = Field(
        description="The department's Slurm account (not root, nor hyperpod-users, the "
        "platform's account for users no department lists)."
    )
    description: SlurmDescription = Field("", description="What the department is (sacctmgr Description).")
    fairshare: int = Field(
        default=1,
        ge=1,
        le=1_000_000,
        description="Relative share of the cluster (sacctmgr Fairshare): 30 and 10 give a 3:1 split when both are busy.",
    )
    qos: list[SlurmName] = Field(
        [],
        description="QoS the department's users may ask for (--qos), defined under cluster.accounting.qos or "
        "normal; default: only default_qos.",
    )
    default_qos: SlurmName = Field(SLURM_DEFAULT_QOS, description="The QoS a job gets without --qos; one of qos.")
    users: list[PosixName] = Field(
        [], description="Names from users[]. A user's default account is the first department listing them."
    )
    coordinators: list[PosixName] = Field(
        [], description="Users of this department who may manage its associations and limits (sacctmgr coordinators)."
    )
    monthly_budget_usd: int | None = Field(
        default=None,
        ge=1,
        le=100_000_000,
        description="An AWS Budgets monthly cost budget over what carries the tag "
        "<cluster.budget.department_tag_key>=<name> (platform_config/budgets.py department_tags), alerting "
        "cluster.budget's recipients plus budget_emails; needs cluster.budget.",
    )
    budget_emails: list[Email] = Field(
        default=[],
        max_length=10,
        description="More recipients of the department budget's alerts (at most 10 e-mails with cluster.budget.emails).",
    )

    @property
    def allowed_qos(self) -> list[str]:
        return list(self.qos) or [self.default_qos]


class PriorityWeights(Strict):
    """priority/multifactor weights (slurm.conf PriorityWeight*): the weights you expect. HyperPod owns slurm.conf, so
    the controller only compares them with `scontrol show config` and logs a warning on a difference."""

    fairshare: int = Field(default=10000, ge=0, le=4294967295, description="PriorityWeightFairshare.")
    qos: int = Field(default=1000, ge=0, le=4294967295, description="PriorityWeightQOS.")
    age: int = Field(default=1000, ge=0, le=4294967295, description="PriorityWeightAge.")
    job_size: int = Field(default=0, ge=0, le=4294967295, description="PriorityWeightJobSize.")


# Where slurmdbd stores accounting (lifecycle/hyperpod/README.md, "Slurm accounting"): `hyperpod`, HyperPod's own MariaDB
# on the controller; `managed`, an RDS for MySQL instance the cluster stack creates (constructs/accounting_database.py)
# and attaches through Orchestrator.Slurm.AccountingDatabase.
ACCOUNTING_DATABASES = ("hyperpod", "managed")
# Burstable Graviton classes RDS for MySQL offers; slurmdbd's load is a few writes per job.
DbInstanceClass = Annotated[
    str,
    pattern(
        r"db\.(t4g|m7g|r7g|m6g|r6g)\.(micro|small|medium|large|xlarge|2xlarge)",
        "an RDS Graviton instance class such as db.t4g.small (db.t4g, m6g, m7g, r6g or r7g, micro to 2xlarge)",
    ),
]


class ManagedAccountingDatabase(Strict):
    """The RDS for MySQL instance of `database: managed`."""

    instance_class: DbInstanceClass = Field("db.t4g.small", description="The RDS instance class.")
    allocated_storage_gib: int = Field(default=20, ge=20, le=1000, description="The database's storage, GiB.")
    multi_az: StrictBool = Field(
        False,
        description="A standby in a second AZ: RDS fails over on a host or AZ failure (about a minute) instead "
        "of replacing the host.",
    )
    backup_retention_days: int = Field(default=7, ge=1, le=35, description="Days RDS keeps automated backups.")
    require_tls: StrictBool = Field(
        True,
        description="require_secure_transport=1 in the instance's parameter group: the database refuses any "
        "connection without TLS. HyperPod's slurmdbd must then connect with TLS (MySQL's client "
        "library prefers TLS when the server offers it); turn off only if slurmdbd's log shows "
        '"Connections using insecure transport are prohibited" (docs/security.md).',
    )


class Accounting(Strict):
    """Slurm accounting on HyperPod's slurmdbd: departments become accounts, with users' associations, coordinators,
    QoS and fair share, applied by lifecycle/hyperpod/apply_accounting.sh. `database` picks where slurmdbd stores it."""

    enabled: StrictBool = Field(
        False,
        description="Slurm accounting for departments: accounts, associations, QoS and fair share applied with "
        "sacctmgr. Slurm orchestrator only.",
    )
    database: Literal[ACCOUNTING_DATABASES] = Field(  # type: ignore[valid-type]
        "hyperpod",
        description="hyperpod: HyperPod's MariaDB on the controller; managed: an RDS for MySQL instance the "
        "cluster stack creates (private subnets, customer key, deletion protection, final "
        "snapshot, RDS-rotated secret, 3306 only from the controller's own security group) "
        "attached as Orchestrator.Slurm.AccountingDatabase. managed needs enabled, "
        "cluster.node_provisioning_mode: Continuous and private subnets in 2 AZs, and cannot be "
        'reverted on a cluster (lifecycle/hyperpod/README.md, "Slurm accounting").',
    )
    managed_database: ManagedAccountingDatabase = Field(
        ManagedAccountingDatabase(), description="The managed database (database: managed)."
    )
    qos: list[Qos] = Field([], description="Slurm QoS: limits per user and in total, priority.")
    departments: list[Department] = Field(
        [],
        description="One Slurm account each. Refused with shared_fsx: true while Studio is on (the munge key in "
        "every space would make any member root on the compute nodes).",
    )
    priority_weights: PriorityWeights = Field(
        PriorityWeights(), description="The priority/multifactor weights you expect."
    )


def managed_database_errors(cfg: PlatformConfig) -> list[str]:
    """What `cluster.accounting.database: managed` needs (https://docs.aws.amazon.com/sagemaker/latest/dg/
    sagemaker-hyperpod-external-accounting-db-slurm.html: continuous provisioning; an RDS subnet group needs subnets
    in at least two AZs)."""
    path = "cluster.accounting.database"
    if cfg.cluster.accounting.database != "managed":
        return []
    errors: list[str] = []
    if cfg.orchestrator != "slurm":
        errors.append(
            f"{path}: 'managed' with orchestrator {cfg.orchestrator!r}; allowed only with orchestrator slurm "
            "(it is Slurm's accounting database)"
        )
    if not cfg.cluster.accounting.enabled:
        errors.append(
            f"{path}: 'managed' with cluster.accounting.enabled: false; allowed only with accounting "
            "enabled (or use database: hyperpod)"
        )
    if cfg.cluster.node_provisioning_mode != "Continuous":
        errors.append(
            f"cluster.node_provisioning_mode: {cfg.cluster.node_provisioning_mode!r} with {path}: managed; "
            "allowed: 'Continuous' (HyperPod attaches an external accounting database only to clusters in "
            "continuous provisioning mode)"
        )
    azs = set(private_subnet_az_ids(cfg))
    if len(azs) < 2:
        where = "network.existing.private_subnets" if cfg.network.existing else "network.az_ids"
        errors.append(
            f"{where}: {sorted(azs)} with {path}: managed; allowed: private subnets in at least 2 AZs "
            "(an RDS DB subnet group must cover two Availability Zones)"
        )
    return errors


def accounting_errors(cfg: PlatformConfig) -> list[str]:
    acct = cfg.cluster.accounting
    errors: list[str] = []
    add = errors.append
    path = "cluster.accounting"
    if not acct.enabled:
        if acct.departments or acct.qos:
            add(
                f"{path}.enabled: false with {len(acct.departments)} department(s) and {len(acct.qos)} QoS; enable "
                "accounting or remove them"
            )
        errors.extend(managed_database_errors(cfg))
        return errors
    if cfg.orchestrator != "slurm":
        add(f"{path}.enabled: true with orchestrator {cfg.orchestrator!r}; Slurm accounting needs orchestrator slurm")
    errors.extend(managed_database_errors(cfg))

    qos_names: dict[str, int] = {}
    for i, q in enumerate(acct.qos):
        if q.name in qos_names:
            add(
                f"{path}.qos[{i}].name: {q.name!r} is already used by {path}.qos[{qos_names[q.name]}]; QoS names must "
                "be unique"
            )
        qos_names.setdefault(q.name, i)
    compute = [g for g in cfg.cluster.instance_groups if g.role == "compute"]
    nodes = sum(g.instance_count for g in compute)
    gpus = sum(nvidia_gpus(g.instance_type) * g.instance_count for g in compute)
    for i, q in enumerate(acct.qos):
        for key in ("max_tres_per_user", "grp_tres"):
            tres = getattr(q, key)
            if tres.node is not None and tres.node > nodes:
                add(
                    f"{path}.qos[{i}].{key}.node: {tres.node}; the compute groups have {nodes} node(s) in total, so "
                    "the limit could never bind; allowed: at most " + str(nodes)
                )
            if tres.gpu is not None and gpus == 0:
                types = sorted({g.instance_type for g in compute})
                add(
                    f"{path}.qos[{i}].{key}.gpu: {tres.gpu}; no compute group has NVIDIA GPUs (instance types "
                    f"{', '.join(types) or 'none'}; GPU types and counts in config/facts/accelerators.json), so "
                    "Slurm has no gpu GRES to limit; remove the gpu limit or add a GPU instance group"
                )
            elif tres.gpu is not None and tres.gpu > gpus:
                add(
                    f"{path}.qos[{i}].{key}.gpu: {tres.gpu}; the compute groups have {gpus} NVIDIA GPU(s) in total "
                    f"(counts in config/facts/accelerators.json), so the limit could never bind; allowed: at most {gpus}"
                )
        per_user, group = q.max_tres_per_user, q.grp_tres
        for res in ("cpu", "node", "gpu"):
            mine, theirs = getattr(per_user, res), getattr(group, res)
            if mine is not None and theirs is not None and mine > theirs:
                add(
                    f"{path}.qos[{i}].max_tres_per_user.{res}: {mine} is more than grp_tres.{res} {theirs}, the "
                    "QoS's total; allowed: at most " + str(theirs)
                )

    known_qos = set(qos_names) | {SLURM_DEFAULT_QOS}
    users = {u.name for u in cfg.users}
    departments: dict[str, int] = {}
    for i, d in enumerate(acct.departments):
        dpath = f"{path}.departments[{i}]"
        if d.name in departments:
            add(
                f"{dpath}.name: {d.name!r} is already used by {path}.departments[{departments[d.name]}]; each "
                "department is one Slurm account, names must be unique"
            )
        elif d.name == "root":
            add(f"{dpath}.name: 'root' is Slurm's own top account; choose another name")
        elif d.name == PLATFORM_USERS_ACCOUNT:
            add(
                f"{dpath}.name: {PLATFORM_USERS_ACCOUNT!r} is the platform's account for users no department lists; "
                "choose another name"
            )
        departments.setdefault(d.name, i)
        for j, qos_name in enumerate(d.qos):
            if qos_name not in known_qos:
                add(
                    f"{dpath}.qos[{j}]: {qos_name!r} is not a QoS; allowed: {', '.join(sorted(known_qos))} "
                    f"(define it under {path}.qos)"
                )
        if d.default_qos not in known_qos:
            add(
                f"{dpath}.default_qos: {d.default_qos!r} is not a QoS; allowed: {', '.join(sorted(known_qos))} "
                f"(define it under {path}.qos)"
            )
        elif d.qos and d.default_qos not in d.qos:
            add(f"{dpath}.default_qos: {d.default_qos!r} is not in the department's qos {list(d.qos)}; add it there")
        for j, u in enumerate(d.users):
            if u not in users:
                add(
                    f"{dpath}.users[{j}]: {u!r} is not a user; allowed: {', '.join(sorted(users)) or '(no users)'} "
                    "(Slurm runs jobs as the user's POSIX account, which `users` creates on every node)"
                )
        for j, c in enumerate(d.coordinators):
            if c not in d.users:
                add(
                    f"{dpath}.coordinators[{j}]: {c!r} is not one of the department's users "
                    f"{list(d.users)}; list them in users first"
                )
    return errors
