"""lifecycle/hyperpod/lib/accounting.py: the sacctmgr commands planned from the parameters and `sacctmgr -n -P show`
output. The state here is written in the format real sacctmgr 22.05 printed in tests/e2e/test_slurm_accounting.py."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("accounting", ROOT / "lifecycle" / "hyperpod" / "lib" / "accounting.py")
accounting = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(accounting)

CLUSTER = "ml-cluster"


def params(departments=None, qos=None) -> dict:
    return {
        "accounting": {
            "enabled": True,
            "qos": qos or [],
            "departments": departments
            if departments is not None
            else [
                {
                    "name": "physics",
                    "description": "Physics",
                    "fairshare": 40,
                    "qos": ["normal", "short"],
                    "default_qos": "normal",
                    "users": ["ada", "enrico"],
                    "coordinators": ["ada"],
                }
            ],
        }
    }


def state(tmp_path: Path, *, qos="normal|Normal QOS default|0||||", assoc="", accounts="", users="") -> str:
    files = {
        "clusters.txt": CLUSTER,
        "qos.txt": qos,
        "assoc.txt": "root|||1|normal|\nroot|root|1|normal|\n" + assoc,
        "accounts.txt": "root|default root account|root|\n" + accounts,
        "users.txt": "root|root\n" + users,
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text + "\n")
    return str(tmp_path)


APPLIED = dict(
    assoc="physics||40|normal,short|normal\nphysics|ada|1|normal,short|normal\nphysics|enrico|1|short,normal|normal",
    accounts="physics|physics|hyperpod-platform|ada",
    users="ada|physics\nenrico|physics",
)


def test_applied_state_plans_nothing(tmp_path):
    # sacctmgr lists QoS in its own order and account descriptions in lower case: neither is a change.
    assert accounting.plan(params(), CLUSTER, state(tmp_path, **APPLIED)) == []


def test_removed_user_loses_the_association_and_coordination_only(tmp_path):
    p = params(
        [
            {
                "name": "physics",
                "description": "Physics",
                "fairshare": 40,
                "qos": ["normal", "short"],
                "default_qos": "normal",
                "users": ["enrico"],
                "coordinators": ["enrico"],
            }
        ]
    )
    assert accounting.plan(p, CLUSTER, state(tmp_path, **APPLIED)) == [
        ["remove", "coordinator", "account=physics", "names=ada"],
        ["add", "coordinator", "account=physics", "names=enrico"],
        ["remove", "user", "where", "name=ada", "account=physics", f"cluster={CLUSTER}"],
    ]


def test_department_dropped_from_the_config_keeps_its_account_and_loses_its_users(tmp_path):
    other = dict(APPLIED, accounts=APPLIED["accounts"] + "\nlab|a lab made by hand|ops|")
    other["assoc"] += "\nlab|ada|1|normal|normal"
    assert accounting.plan(params([]), CLUSTER, state(tmp_path, **other)) == [
        ["remove", "coordinator", "account=physics", "names=ada"],
        ["remove", "user", "where", "name=ada", "account=physics", f"cluster={CLUSTER}"],
        ["remove", "user", "where", "name=enrico", "account=physics", f"cluster={CLUSTER}"],
    ]  # the hand-made `lab` account (not ours) and its association are left alone


def test_default_account_follows_the_first_department(tmp_path):
    p = params(
        [
            {
                "name": "teaching",
                "fairshare": 1,
                "qos": ["normal"],
                "default_qos": "normal",
                "users": ["ada"],
                "coordinators": [],
            },
            {
                "name": "physics",
                "description": "Physics",
                "fairshare": 40,
                "qos": ["normal", "short"],
                "default_qos": "normal",
                "users": ["ada", "enrico"],
                "coordinators": ["ada"],
            },
        ]
    )
    plan = accounting.plan(p, CLUSTER, state(tmp_path, **APPLIED))
    assert plan == [
        [
            "add",
            "account",
            "teaching",
            f"Cluster={CLUSTER}",
            "Description=teaching",
            "Organization=hyperpod-platform",
            "Fairshare=1",
            "QOS=normal",
            "DefaultQOS=normal",
        ],
        ["add", "user", "ada", "Account=teaching", f"Cluster={CLUSTER}", "QOS=normal", "DefaultQOS=normal"],
        ["modify", "user", "where", "name=ada", "set", "DefaultAccount=teaching"],
    ]


def test_new_users_of_one_department_are_added_in_one_command(tmp_path):
    plan = accounting.plan(params(), CLUSTER, state(tmp_path))
    assert [
        "add",
        "user",
        "ada,enrico",
        "Account=physics",
        f"Cluster={CLUSTER}",
        "DefaultAccount=physics",
        "QOS=normal,short",
        "DefaultQOS=normal",
    ] in plan


@pytest.mark.parametrize(
    "current, desired, change",
    [
        ("", "gres/gpu=4", "gres/gpu=4"),
        ("cpu=2,gres/gpu=4", "gres/gpu=4", "cpu=-1,gres/gpu=4"),
        ("gres/gpu=4", "", "gres/gpu=-1"),
        ("gres/gpu=4,node=1", "node=1,gres/gpu=4", None),
    ],
)
def test_tres_changes_clear_what_is_no_longer_limited(current, desired, change):
    assert accounting.tres_change(current, desired) == change


@pytest.mark.parametrize(
    "text, minutes", [("", None), ("04:00:00", 240), ("7-00:00:00", 10080), ("2-01:30:00", 2970), ("30:00", 30)]
)
def test_max_wall_as_sacctmgr_prints_it(text, minutes):
    assert accounting.minutes(text) == minutes


def test_qos_limits_are_modified_and_cleared(tmp_path):
    current = "normal|Normal QOS default|0||||\nshort|quick|50|04:00:00|cpu=2,gres/gpu=4|gres/gpu=12|2"
    qos = [
        {
            "name": "short",
            "description": "quick",
            "priority": 50,
            "max_tres_per_user": "gres/gpu=4",
            "grp_tres": "",
            "max_wall_minutes": None,
            "max_jobs_per_user": None,
        }
    ]
    assert accounting.plan(params([], qos), CLUSTER, state(tmp_path, qos=current)) == [
        [
            "modify",
            "qos",
            "where",
            "name=short",
            "set",
            "MaxWall=-1",
            "MaxTRESPerUser=cpu=-1,gres/gpu=4",
            "GrpTRES=gres/gpu=-1",
            "MaxJobsPerUser=-1",
        ]
    ]


def test_disabled_without_users_plans_nothing(tmp_path):
    assert accounting.plan({"accounting": {"enabled": False}, "users": []}, CLUSTER, state(tmp_path)) == []


def test_unexpected_sacctmgr_output_is_an_error(tmp_path):
    path = state(tmp_path)
    (tmp_path / "qos.txt").write_text("normal|x\n")
    with pytest.raises(accounting.AccountingError, match="has 2 fields, expected 7"):
        accounting.plan(params(), CLUSTER, path)


def test_users_without_a_department_go_to_the_platforms_account(tmp_path):
    p = params()
    p["users"] = [{"name": "ada"}, {"name": "enrico"}, {"name": "grace"}]
    assert accounting.plan(p, CLUSTER, state(tmp_path, **APPLIED)) == [
        [
            "add",
            "account",
            accounting.USERS_ACCOUNT,
            f"Cluster={CLUSTER}",
            f"Description={accounting.USERS_ACCOUNT_DESCRIPTION}",
            f"Organization={accounting.ORGANIZATION}",
        ],
        [
            "add",
            "user",
            "grace",
            f"Account={accounting.USERS_ACCOUNT}",
            f"Cluster={CLUSTER}",
            f"DefaultAccount={accounting.USERS_ACCOUNT}",
        ],
    ]


def test_accounting_off_registers_every_user_and_touches_no_department(tmp_path):
    p = params()
    p["accounting"]["enabled"] = False
    p["users"] = [{"name": "ada"}, {"name": "enrico"}]
    # ada and enrico keep their physics associations and default account from when accounting was on.
    assert accounting.plan(p, CLUSTER, state(tmp_path, **APPLIED)) == [
        [
            "add",
            "account",
            accounting.USERS_ACCOUNT,
            f"Cluster={CLUSTER}",
            f"Description={accounting.USERS_ACCOUNT_DESCRIPTION}",
            f"Organization={accounting.ORGANIZATION}",
        ],
        ["add", "user", "ada,enrico", f"Account={accounting.USERS_ACCOUNT}", f"Cluster={CLUSTER}"],
    ]


def test_a_user_who_joins_a_department_leaves_the_platforms_account(tmp_path):
    p = params()
    p["users"] = [{"name": "ada"}, {"name": "enrico"}]
    applied = dict(
        APPLIED,
        users="ada|physics\nenrico|hyperpod-users",
        accounts=APPLIED["accounts"] + "\nhyperpod-users|cluster users without a department|hyperpod-platform|",
    )
    applied["assoc"] += "\nhyperpod-users||1|normal|\nhyperpod-users|enrico|1|normal|"
    assert accounting.plan(p, CLUSTER, state(tmp_path, **applied)) == [
        ["modify", "user", "where", "name=enrico", "set", "DefaultAccount=physics"],
        ["remove", "user", "where", "name=enrico", "account=hyperpod-users", f"cluster={CLUSTER}"],
    ]


def test_limits_on_untracked_tres_are_left_out_and_reported(tmp_path):
    qos = [
        {
            "name": "short",
            "description": "short",
            "priority": 0,
            "max_tres_per_user": "cpu=8,gres/gpu=4",
            "grp_tres": "gres/gpu=16",
            "max_wall_minutes": None,
            "max_jobs_per_user": None,
        }
    ]
    st = state(
        tmp_path,
        qos="normal|Normal QOS default|0||||\nshort|short|0||||",
        **{k: v for k, v in APPLIED.items() if k != "qos"},
    )
    (tmp_path / "tres.txt").write_text("cpu|\nmem|\nnode|\nbilling|\n")
    p = params(qos=qos)
    assert accounting.plan(p, CLUSTER, st) == [["modify", "qos", "where", "name=short", "set", "MaxTRESPerUser=cpu=8"]]
    assert accounting.untracked_limits(p, accounting.tracked_tres(st)) == [
        "QoS short: max_tres_per_user gres/gpu=4 not applied, slurmdbd does not track gres/gpu "
        "(AccountingStorageTRES in slurm.conf)",
        "QoS short: grp_tres gres/gpu=16 not applied, slurmdbd does not track gres/gpu "
        "(AccountingStorageTRES in slurm.conf)",
    ]
    (tmp_path / "tres.txt").write_text("cpu|\nmem|\nnode|\nbilling|\ngres|gpu\n")
    assert accounting.plan(p, CLUSTER, st) == [
        ["modify", "qos", "where", "name=short", "set", "MaxTRESPerUser=cpu=8,gres/gpu=4", "GrpTRES=gres/gpu=16"]
    ]


def test_the_config_refuses_a_department_named_like_the_platforms_account():
    from platform_config.accounting import PLATFORM_USERS_ACCOUNT

    assert PLATFORM_USERS_ACCOUNT == accounting.USERS_ACCOUNT
