"""What the controller's apply_accounting.sh applies with sacctmgr: cluster.accounting as platform_parameters.json's
`accounting` section. Pure data, no CDK, so the real-Slurm test builds it from a config the same way the stack does."""

from __future__ import annotations

from typing import Any

from platform_config import PlatformConfig
from platform_config.facts import nvidia_gpus


def accounting_parameters(config: PlatformConfig) -> dict[str, Any]:
    acct = config.cluster.accounting
    weights = acct.priority_weights
    return {
        "enabled": acct.enabled,
        # sacctmgr's own spellings, so lifecycle/hyperpod/lib/accounting.py compares them with `sacctmgr show -P`.
        "qos": [
            {
                "name": q.name,
                "description": q.description,
                "priority": q.priority,
                "max_tres_per_user": q.max_tres_per_user.sacctmgr(),
                "grp_tres": q.grp_tres.sacctmgr(),
                "max_wall_minutes": q.max_wall_minutes,
                "max_jobs_per_user": q.max_jobs_per_user,
            }
            for q in acct.qos
        ],
        "departments": [
            {
                "name": d.name,
                "description": d.description,
                "fairshare": d.fairshare,
                "qos": d.allowed_qos,
                "default_qos": d.default_qos,
                "users": list(d.users),
                "coordinators": list(d.coordinators),
            }
            for d in acct.departments
        ],
        "priority_weights": {
            "PriorityWeightFairshare": weights.fairshare,
            "PriorityWeightQOS": weights.qos,
            "PriorityWeightAge": weights.age,
            "PriorityWeightJobSize": weights.job_size,
        },
    }


def worker_groups(config: PlatformConfig) -> list[dict[str, Any]]:
    """platform_parameters.json `worker_groups`: each compute group's partition and the NVIDIA GPUs per node that
    lifecycle/hyperpod/check_gres.sh expects Slurm to show as GRES."""
    return [
        {
            "instance_group_name": g.name,
            "partition_name": (g.partitions or [g.name])[0],
            "gpus": nvidia_gpus(g.instance_type),
        }
        for g in config.group("compute")
    ]
