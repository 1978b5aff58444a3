#!/usr/bin/env python3
"""Plans the sacctmgr commands that make Slurm's accounting database match platform_parameters.json.

Standard library only (it runs on the controller before anything is installed). It never calls Slurm itself:
apply_accounting.sh dumps the current state with `sacctmgr -n -P show ...` into a directory, this prints the
commands that are needed (one per line, arguments separated by tabs, without `-i`), and the script runs them. An
empty plan means nothing to change, so a second apply issues no command at all.

    accounting.py plan PARAMS CLUSTER STATE_DIR   -> commands
    accounting.py untracked PARAMS STATE_DIR      -> one line per QoS limit on a TRES slurmdbd does not track
    accounting.py check-config PARAMS SCONTROL_SHOW_CONFIG_FILE -> one warning per line (slurm.conf is HyperPod's)

State files in STATE_DIR (the `format=` lists in apply_accounting.sh):
    qos.txt       name|description|priority|maxwall|maxtrespu|grptres|maxjobspu
    assoc.txt     account|user|fairshare|qos|defaultqos          (associations of CLUSTER)
    accounts.txt  account|description|organization|coordinators
    users.txt     user|defaultaccount
    tres.txt      type|name                                       (optional: without it every TRES counts as tracked)

Every configured user gets an association, whether or not cluster.accounting is enabled, because slurm.conf may enforce
associations (lifecycle/node_contract.json, accounting-enforces-associations): in each department listing them, and a
user no department lists (or every user, with accounting off) in the platform's account USERS_ACCOUNT. With accounting
off, only USERS_ACCOUNT is managed: departments, QoS and default accounts made earlier are left as they are.

What it manages with accounting on: the QoS and departments listed, and the accounts it created
(Organization=hyperpod-platform, USERS_ACCOUNT included). A user no longer listed in a department (or no longer
configured) loses that association (`sacctmgr remove user ... account=...`), which never deletes the user's jobs from
the database: `sacct` keeps showing them. A department removed from the config keeps its account (and its history);
only its users' associations and coordinators go. QoS removed from the config stay. A QoS limit on a TRES slurmdbd does
not track (AccountingStorageTRES, node_contract.json accounting-tracks-gres-gpu) is left out and reported.
"""

import json
import re
import sys

ORGANIZATION = "hyperpod-platform"
# The account of users no department lists; platform_config/accounting.py refuses a department of this name.
USERS_ACCOUNT = "hyperpod-users"
USERS_ACCOUNT_DESCRIPTION = "cluster users without a department"
TIME = re.compile(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)$")


class AccountingError(Exception):
    pass


def rows(path, fields):
    """`sacctmgr -n -P` output as dicts; sacctmgr indents nothing with -P, but strip anyway."""
    out = []
    try:
        with open(path, encoding="utf-8") as f:
            lines = [line.rstrip("\n") for line in f if line.strip()]
    except FileNotFoundError:
        raise AccountingError(f"{path} not found") from None
    for line in lines:
        values = line.split("|")
        if len(values) < len(fields):
            raise AccountingError(f"{path}: {line!r} has {len(values)} fields, expected {len(fields)}")
        out.append(dict(zip(fields, (v.strip() for v in values))))
    return out


def minutes(value):
    """sacctmgr's MaxWall ('04:00:00', '2-00:00:00', '' for none) in minutes, or None."""
    if not value:
        return None
    m = TIME.match(value)
    if not m:
        raise AccountingError(f"unexpected time {value!r} from sacctmgr")
    days, hours, mins, _secs = (int(g) if g else 0 for g in m.groups())
    if m.group(2) is None:  # MM:SS
        hours, mins = 0, int(m.group(3))
    return (days * 24 + hours) * 60 + mins


def tres(value):
    """'cpu=2,gres/gpu=4' -> {'cpu': '2', 'gres/gpu': '4'}."""
    return dict(item.split("=", 1) for item in value.split(",") if "=" in item) if value else {}


def tracked_tres(state):
    """TRES slurmdbd tracks ('cpu', 'gres/gpu', ...) from tres.txt; None when the state has no tres.txt."""
    try:
        return {
            f"{r['type']}/{r['name']}" if r["name"] else r["type"] for r in rows(f"{state}/tres.txt", ["type", "name"])
        }
    except AccountingError:
        return None


def split_untracked(value, tracked):
    """(the limits on tracked TRES as a TRES string, the limits left out) for a desired TRES string."""
    if tracked is None:
        return value or "", []
    limits = tres(value)
    kept = {k: v for k, v in limits.items() if k in tracked}
    return ",".join(f"{k}={v}" for k, v in kept.items()), [f"{k}={v}" for k, v in limits.items() if k not in tracked]


def untracked_limits(params, tracked):
    acct = params.get("accounting") or {}
    if not acct.get("enabled"):
        return []
    lines = []
    for q in acct.get("qos") or []:
        for key in ("max_tres_per_user", "grp_tres"):
            _, left_out = split_untracked(q.get(key) or "", tracked)
            if left_out:
                lines.append(
                    f"QoS {q['name']}: {key} {','.join(left_out)} not applied, slurmdbd does not track "
                    f"{','.join(k.split('=')[0] for k in left_out)} (AccountingStorageTRES in slurm.conf)"
                )
    return lines


def tres_change(current, desired):
    """The TRES string that turns `current` into `desired`; -1 clears a limit (sacctmgr(1))."""
    now, want = tres(current), tres(desired)
    if now == want:
        return None
    changes = dict(want)
    changes.update({k: "-1" for k in now if k not in want})
    return ",".join(f"{k}={v}" for k, v in sorted(changes.items()))


def qos_commands(desired, current, tracked=None):
    commands = []
    have = {q["name"]: q for q in current}
    for q in desired:
        now = have.get(q["name"])
        if now is None:
            commands.append(["add", "qos", q["name"]])
            now = {"description": "", "priority": "0", "maxwall": "", "maxtrespu": "", "grptres": "", "maxjobspu": ""}
        sets = []
        # A new QoS gets its name as description; set ours whenever it differs.
        if (q.get("description") or q["name"]) != now["description"]:
            sets.append(f"Description={q.get('description') or q['name']}")
        if str(q.get("priority") or 0) != (now["priority"] or "0"):
            sets.append(f"Priority={q.get('priority') or 0}")
        if q.get("max_wall_minutes") != minutes(now["maxwall"]):
            sets.append(f"MaxWall={q.get('max_wall_minutes') or -1}")
        for key, field, option in (
            ("max_tres_per_user", "maxtrespu", "MaxTRESPerUser"),
            ("grp_tres", "grptres", "GrpTRES"),
        ):
            change = tres_change(now[field], split_untracked(q.get(key) or "", tracked)[0])
            if change:
                sets.append(f"{option}={change}")
        if str(q.get("max_jobs_per_user") or "") != now["maxjobspu"]:
            sets.append(f"MaxJobsPerUser={q.get('max_jobs_per_user') or -1}")
        if sets:
            commands.append(["modify", "qos", "where", f"name={q['name']}", "set", *sets])
    return commands


def split(value):
    return sorted(v for v in value.split(",") if v) if value else []


def plan(params, cluster, state):
    acct = params.get("accounting") or {}
    enabled = bool(acct.get("enabled"))
    configured_users = [u["name"] for u in params.get("users") or []]
    clusters = [r["cluster"] for r in rows(f"{state}/clusters.txt", ["cluster"])]
    qos = rows(f"{state}/qos.txt", ["name", "description", "priority", "maxwall", "maxtrespu", "grptres", "maxjobspu"])
    assoc = rows(f"{state}/assoc.txt", ["account", "user", "fairshare", "qos", "defaultqos"])
    accounts = {
        a["account"]: a
        for a in rows(f"{state}/accounts.txt", ["account", "description", "organization", "coordinators"])
    }
    users = {u["user"]: u for u in rows(f"{state}/users.txt", ["user", "defaultaccount"])}

    commands = [] if cluster in clusters else [["add", "cluster", cluster]]
    if enabled:
        commands += qos_commands(acct.get("qos") or [], qos, tracked_tres(state))

    departments = (acct.get("departments") or []) if enabled else []
    account_assoc = {a["account"]: a for a in assoc if not a["user"]}
    user_assoc = {(a["account"], a["user"]): a for a in assoc if a["user"]}
    for d in departments:
        name, qos_list = d["name"], ",".join(d["qos"])
        description = d.get("description") or name
        now = account_assoc.get(name)
        if now is None:
            commands.append(
                [
                    "add",
                    "account",
                    name,
                    f"Cluster={cluster}",
                    f"Description={description}",
                    f"Organization={ORGANIZATION}",
                    f"Fairshare={d['fairshare']}",
                    f"QOS={qos_list}",
                    f"DefaultQOS={d['default_qos']}",
                ]
            )
            continue
        sets = []
        if now["fairshare"] != str(d["fairshare"]):
            sets.append(f"Fairshare={d['fairshare']}")
        if split(now["qos"]) != sorted(d["qos"]):
            sets.append(f"QOS={qos_list}")
        if now["defaultqos"] != d["default_qos"]:
            sets.append(f"DefaultQOS={d['default_qos']}")
        if sets:
            commands.append(["modify", "account", "where", f"name={name}", f"cluster={cluster}", "set", *sets])
        existing = accounts.get(name, {})
        # sacctmgr stores account descriptions in lower case.
        if existing.get("description", "").lower() != description.lower():
            commands.append(["modify", "account", "where", f"name={name}", "set", f"Description={description}"])

    # Users: every (department, user) association, the user's default account (the first department listing them);
    # a configured user no department lists goes to USERS_ACCOUNT.
    wanted: dict[tuple[str, str], dict | None] = {}
    default_account: dict[str, str] = {}
    for d in departments:
        for user in d["users"]:
            wanted[(d["name"], user)] = d
            default_account.setdefault(user, d["name"])
    without_department = [u for u in configured_users if u not in default_account]
    for user in without_department:
        wanted[(USERS_ACCOUNT, user)] = None
        default_account[user] = USERS_ACCOUNT
    if without_department and USERS_ACCOUNT not in account_assoc:
        commands.append(
            [
                "add",
                "account",
                USERS_ACCOUNT,
                f"Cluster={cluster}",
                f"Description={USERS_ACCOUNT_DESCRIPTION}",
                f"Organization={ORGANIZATION}",
            ]
        )
    additions: dict[
        tuple[str, ...], list[str]
    ] = {}  # one `add user a,b,c ...` per account and settings: each sacctmgr call commits on its own
    for (account, user), d in wanted.items():
        now = user_assoc.get((account, user))
        if now is None:
            extra = () if user in users else (f"DefaultAccount={default_account[user]}",)
            qos_settings = (f"QOS={','.join(d['qos'])}", f"DefaultQOS={d['default_qos']}") if d else ()
            settings = (f"Account={account}", f"Cluster={cluster}", *extra, *qos_settings)
            additions.setdefault(settings, []).append(user)
        elif d and (split(now["qos"]) != sorted(d["qos"]) or now["defaultqos"] != d["default_qos"]):
            commands.append(
                [
                    "modify",
                    "user",
                    "where",
                    f"name={user}",
                    f"account={account}",
                    f"cluster={cluster}",
                    "set",
                    f"QOS={','.join(d['qos'])}",
                    f"DefaultQOS={d['default_qos']}",
                ]
            )
    commands += [["add", "user", ",".join(names), *settings] for settings, names in additions.items()]
    if enabled:  # with accounting off, a default account made earlier stays
        for user, account in default_account.items():
            if user in users and users[user]["defaultaccount"] != account:
                commands.append(["modify", "user", "where", f"name={user}", "set", f"DefaultAccount={account}"])

    if enabled:
        managed = [d["name"] for d in departments]
        managed += sorted(a for a, row in accounts.items() if row["organization"] == ORGANIZATION and a not in managed)
    else:
        managed = [USERS_ACCOUNT] if USERS_ACCOUNT in accounts else []
    coordinators = {d["name"]: set(d.get("coordinators") or []) for d in departments}
    for account in managed:
        now = set(split(accounts.get(account, {}).get("coordinators", "")))
        want = coordinators.get(account, set())
        for user in sorted(now - want):
            commands.append(["remove", "coordinator", f"account={account}", f"names={user}"])
        if want - now:
            commands.append(["add", "coordinator", f"account={account}", f"names={','.join(sorted(want - now))}"])
    for account in managed:
        for assoc_account, user in sorted(user_assoc):
            if assoc_account == account and (account, user) not in wanted:
                commands.append(["remove", "user", "where", f"name={user}", f"account={account}", f"cluster={cluster}"])
    return commands


# scontrol show config spells these keys this way (Slurm 22.05).
WEIGHT_KEYS = {
    "PriorityWeightFairshare": "PriorityWeightFairShare",
    "PriorityWeightQOS": "PriorityWeightQOS",
    "PriorityWeightAge": "PriorityWeightAge",
    "PriorityWeightJobSize": "PriorityWeightJobSize",
}
ENFORCE = ("associations", "limits", "qos")


def check_config(params, config_text):
    """What the running slurmctld does not do that the config asks for: slurm.conf is HyperPod's, so warn only."""
    acct = params.get("accounting") or {}
    if not acct.get("enabled"):
        return []
    config = {}
    for line in config_text.splitlines():
        if "=" in line:
            key, value = line.split("=", 1)
            config[key.strip()] = value.strip()
    warnings = []
    enforce = config.get("AccountingStorageEnforce", "none").split(",")
    missing = [e for e in ENFORCE if e not in enforce]
    if missing:
        warnings.append(
            f"AccountingStorageEnforce is {config.get('AccountingStorageEnforce', 'unset')!r}, without "
            f"{','.join(missing)}: departments' associations and QoS limits are recorded but not enforced"
        )
    if config.get("PriorityType") != "priority/multifactor":
        warnings.append(
            f"PriorityType is {config.get('PriorityType', 'unset')!r}, not priority/multifactor: fair "
            "share and QoS priority do not order the queue"
        )
    for ours, theirs in WEIGHT_KEYS.items():
        want = (acct.get("priority_weights") or {}).get(ours)
        if want is not None and config.get(theirs) != str(want):
            warnings.append(
                f"{theirs} is {config.get(theirs, 'unset')!r}, cluster.accounting.priority_weights asks for {want}"
            )
    return warnings


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise AccountingError(f"cannot read {path}: {e}") from e


def main(argv):
    command, args = argv[1], argv[2:]
    if command == "plan":
        for cmd in plan(load(args[0]), args[1], args[2]):
            print("\t".join(cmd))
    elif command == "untracked":
        for line in untracked_limits(load(args[0]), tracked_tres(args[1])):
            print(line)
    elif command == "check-config":
        with open(args[1], encoding="utf-8") as f:
            for warning in check_config(load(args[0]), f.read()):
                print(warning)
    else:
        raise AccountingError(f"unknown command {command!r}")


if __name__ == "__main__":
    try:
        main(sys.argv)
    except AccountingError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
