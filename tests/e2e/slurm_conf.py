"""Renders a single-node slurm.conf that runs slurmctld and slurmd on loopback, shaped like HyperPod's, for tests.

HyperPod's cluster agent writes /opt/slurm/etc/slurm.conf on the controller with `SlurmctldHost=<name>(<ip>)`,
`SlurmctldParameters=enable_configless` (login and compute nodes run `slurmd --conf-server <controller>` and keep no
slurm.conf of their own). Whether it also includes `accounting.conf`, a file beside it, is unverified
(lifecycle/node_contract.json, slurm-conf-includes-accounting-conf): the include lines come from that fact's fixture,
and `include_accounting_conf=False` is the variant without them. `ACCOUNTING_CONF` is the included file.

Pure functions, standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

CONTRACT = Path(__file__).resolve().parents[2] / "lifecycle" / "node_contract.json"


def contract_lines(fact_id: str, node_path: str) -> list[str]:
    """The lines lifecycle/node_contract.json's fact `fact_id` puts in `node_path` (its fixture)."""
    facts = {f["id"]: f for f in json.loads(CONTRACT.read_text())["facts"]}
    return [line for f in facts[fact_id]["fixture"].get("files", []) if f["path"] == node_path for line in f["lines"]]


INCLUDE_LINES = contract_lines("slurm-conf-includes-accounting-conf", "/opt/slurm/etc/slurm.conf")


def render_slurm_conf(
    *,
    cluster_name: str,
    hostname: str,
    state_dir: Path | str,
    munge_socket: Path | str,
    slurmctld_port: int,
    slurmd_port: int,
    cpus: int = 1,
    real_memory_mb: int = 1000,
    partition: str = "debug",
    address: str = "127.0.0.1",
    slurm_user: str = "root",
    gres: str = "",
    include_accounting_conf: bool = True,
    backup_controllers: Sequence[tuple[str, str]] = (),
    slurmctld_run_dir: Path | str | None = None,
    slurmctld_timeout: int = 30,
    scheduler_parameters: str = "",
    proctrack_type: str = "proctrack/linuxproc",
) -> str:
    """Returns slurm.conf text for one controller and one compute node on the same host.

    Every file Slurm writes (state, spool, logs, pid files) goes under ``state_dir``; nothing touches
    /var or /run, so several clusters can run side by side. ``munge_socket`` is the munged socket the
    daemons and client commands use (``AuthInfo=socket=...``).

    ``backup_controllers`` (name, address) adds a SlurmctldHost line each after the primary's, as a multi-head
    HyperPod controller group has; they share StateSaveLocation (slurm.conf(5): it "must be readable and writable from
    both the primary and backup controllers"). ``slurmctld_run_dir`` holds slurmctld's pid and log files instead of
    ``state_dir``: each controller mounts its own directory there, since slurmctld kills the process a pid file names.
    ``scheduler_parameters`` is SchedulerParameters (none: Slurm's defaults). ``proctrack_type`` is ProctrackType:
    proctrack/cgroup needs a cgroup.conf beside slurm.conf (``CGROUP_CONF``).
    """
    if not cluster_name or not cluster_name.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"cluster_name must be alphanumeric with - or _, got {cluster_name!r}")
    for name, port in (("slurmctld_port", slurmctld_port), ("slurmd_port", slurmd_port)):
        if not 1024 <= port <= 65535:
            raise ValueError(f"{name} must be 1024-65535, got {port}")
    if slurmctld_port == slurmd_port:
        raise ValueError("slurmctld_port and slurmd_port must differ")
    if proctrack_type not in ("proctrack/linuxproc", "proctrack/cgroup"):
        raise ValueError(f"proctrack_type must be proctrack/linuxproc or proctrack/cgroup, got {proctrack_type!r}")
    if cpus < 1 or real_memory_mb < 1:
        raise ValueError("cpus and real_memory_mb must be >= 1")
    state = Path(state_dir)
    ctld_run = Path(slurmctld_run_dir) if slurmctld_run_dir is not None else state
    # A GPU node as HyperPod writes it: GresTypes and the node's Gres=gpu:<type>:<count> in slurm.conf itself.
    gres_types = sorted({g.split(":")[0] for g in gres.split(",")}) if gres else []
    lines = [
        f"ClusterName={cluster_name}",
        f"SlurmctldHost={hostname}({address})",
        *(f"SlurmctldHost={name}({addr})" for name, addr in backup_controllers),
        "SlurmctldParameters=enable_configless",
        f"SlurmctldPort={slurmctld_port}",
        f"SlurmdPort={slurmd_port}",
        f"SlurmUser={slurm_user}",
        f"SlurmdUser={slurm_user}",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={munge_socket}",
        f"StateSaveLocation={state / 'ctld'}",
        f"SlurmdSpoolDir={state / 'spool'}",
        f"SlurmctldPidFile={ctld_run / 'slurmctld.pid'}",
        f"SlurmdPidFile={state / 'slurmd.pid'}",
        f"SlurmctldLogFile={ctld_run / 'slurmctld.log'}",
        f"SlurmdLogFile={state / 'slurmd.log'}",
        "SlurmctldDebug=info",
        "SlurmdDebug=info",
        f"ProctrackType={proctrack_type}",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "SchedulerType=sched/backfill",
        *([f"SchedulerParameters={scheduler_parameters}"] if scheduler_parameters else []),
        "ReturnToService=2",
        "MpiDefault=none",
        *(INCLUDE_LINES if include_accounting_conf else []),
        f"SlurmctldTimeout={slurmctld_timeout}",
        "SlurmdTimeout=30",
        "InactiveLimit=0",
        "MinJobAge=300",
        "KillWait=5",
        "Waittime=0",
        *([f"GresTypes={','.join(gres_types)}"] if gres_types else []),
        f"NodeName={hostname} NodeAddr={address} CPUs={cpus} RealMemory={real_memory_mb}"
        + (f" Gres={gres}" if gres else "")
        + " State=UNKNOWN",
        f"PartitionName={partition} Nodes={hostname} Default=YES MaxTime=INFINITE State=UP",
    ]
    return "\n".join(lines) + "\n"


# What HyperPod's slurm.conf includes (empty until accounting is set up; here the "none" settings, so that a client
# that cannot resolve the include fails loudly instead of silently using defaults).
ACCOUNTING_CONF = "JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n"


# cgroup.conf for ProctrackType=proctrack/cgroup. autodetect picks cgroup/v1 or cgroup/v2 from what /sys/fs/cgroup is
# (cgroup.conf(5)), as AWS's reference lifecycle script writes it (awslabs/awsome-distributed-ai@95b939cd,
# base-config/utils/pam_adopt_cgroup_wheel.sh). IgnoreSystemd: no systemd or D-Bus runs in the test's root, so under
# cgroup/v2 slurmd makes its own cgroup instead of asking systemd for a scope (cgroup.conf(5) at slurm-24-11-5-1).
CGROUP_CONF = "CgroupPlugin=autodetect\nIgnoreSystemd=yes\n"
