#!/usr/bin/env python3
"""Reads provisioning_parameters.json and resource_config.json for the shell scripts.

Standard library only: it runs on a fresh HyperPod node before anything is installed.
Output is one value or one record per line, tab-separated, so bash can `read` it.
Errors go to stderr as a single line and exit with status 2.
"""
import json
import re
import sys

SUPPORTED_VERSION = 1
USER_NAME = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")
SHA256 = re.compile(r"^[0-9a-f]{64}$")


class ParamsError(Exception):
    pass


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise ParamsError(f"{path} not found") from None
    except json.JSONDecodeError as e:
        raise ParamsError(f"{path} is not valid JSON: {e}") from e


def lookup(data, dotted):
    for key in dotted.split("."):
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def scalar(value):
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        raise ParamsError("value is not a scalar")
    return str(value)


def validate(params):
    problems = []
    if params.get("version") != SUPPORTED_VERSION:
        problems.append(f"version: expected {SUPPORTED_VERSION}, got {params.get('version')!r}")
    orchestrator = params.get("orchestrator", "slurm")
    if orchestrator not in ("slurm", "eks"):
        problems.append(f"orchestrator: expected slurm or eks, got {orchestrator!r}")
    if orchestrator == "slurm" and not params.get("controller_group"):
        problems.append("controller_group: missing")
    if orchestrator == "slurm":
        uri = str((params.get("users_sync") or {}).get("parameters_s3_uri") or "")
        if not uri.startswith("s3://"):
            problems.append(f"users_sync.parameters_s3_uri: must be an s3:// URI, got {uri!r}")
    for i, group in enumerate(params.get("worker_groups") or []):
        if not group.get("instance_group_name"):
            problems.append(f"worker_groups[{i}].instance_group_name: missing")
    fsx = params.get("fsx")
    if fsx and fsx.get("mount"):
        for key in ("dns_name", "mount_name", "mount_path"):
            if not fsx.get(key):
                problems.append(f"fsx.{key}: missing while fsx.mount is true")
    for i, user in enumerate(params.get("users") or []):
        if not USER_NAME.match(str(user.get("name", ""))):
            problems.append(f"users[{i}].name: {user.get('name')!r} is not a valid user name")
        for key in ("uid", "gid"):
            value = user.get(key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1000:
                problems.append(f"users[{i}].{key}: {value!r} must be an integer >= 1000")
    runtime = params.get("container_runtime") or {}
    for i, artifact in enumerate(runtime.get("artifacts") or []):
        if not str(artifact.get("s3_uri", "")).startswith("s3://"):
            problems.append(f"container_runtime.artifacts[{i}].s3_uri: must be an s3:// URI")
        if not SHA256.match(str(artifact.get("sha256", ""))):
            problems.append(f"container_runtime.artifacts[{i}].sha256: must be 64 lowercase hex digits")
    metrics = params.get("node_metrics")
    if metrics:
        url = str(metrics.get("remote_write_url") or "")
        if not url.startswith("https://"):
            problems.append(f"node_metrics.remote_write_url: must be an https:// URL, got {url!r}")
        if not metrics.get("region"):
            problems.append("node_metrics.region: missing")
        interval = metrics.get("scrape_interval_seconds")
        if not isinstance(interval, int) or isinstance(interval, bool) or interval < 1:
            problems.append(f"node_metrics.scrape_interval_seconds: {interval!r} must be a positive integer")
    for i, artifact in enumerate((metrics or {}).get("artifacts") or []):
        if not str(artifact.get("s3_uri", "")).startswith("s3://"):
            problems.append(f"node_metrics.artifacts[{i}].s3_uri: must be an s3:// URI")
        if not SHA256.match(str(artifact.get("sha256", ""))):
            problems.append(f"node_metrics.artifacts[{i}].sha256: must be 64 lowercase hex digits")
    for i, artifact in enumerate((params.get("pam_slurm_adopt") or {}).get("artifacts") or []):
        if not str(artifact.get("s3_uri", "")).startswith("s3://"):
            problems.append(f"pam_slurm_adopt.artifacts[{i}].s3_uri: must be an s3:// URI")
        if not SHA256.match(str(artifact.get("sha256", ""))):
            problems.append(f"pam_slurm_adopt.artifacts[{i}].sha256: must be 64 lowercase hex digits")
    if problems:
        raise ParamsError("invalid provisioning parameters: " + "; ".join(problems))


def node_type(resource_config, params, addresses):
    """Returns (type, group) for the group whose CustomerIpAddress is one of ours."""
    for group in resource_config.get("InstanceGroups", []):
        for instance in group.get("Instances", []):
            if instance.get("CustomerIpAddress") in addresses:
                name = group.get("Name")
                if name == params.get("controller_group"):
                    return "controller", name
                if name and name == params.get("login_group"):
                    return "login", name
                workers = [g.get("instance_group_name") for g in params.get("worker_groups") or []]
                if name in workers:
                    return "compute", name
                raise ParamsError(
                    f"instance group {name!r} is neither the controller, the login group "
                    f"nor one of the worker_groups {workers} in provisioning_parameters.json"
                )
    raise ParamsError(
        f"none of this node's addresses ({' '.join(addresses) or 'none'}) "
        "is a CustomerIpAddress in resource_config.json"
    )


def controller_role(resource_config, params, addresses):
    """Returns (primary|backup, how it was told) for a node of the controller group. A cluster with several
    controllers (HyperPod multi-head) runs slurmctld on each; work that must happen once (accounting) runs on the
    primary. resource_config.json names it in SlurmConfig.PrimaryControllerIp, the backups in SecondaryControllerIps
    (awslabs/awsome-distributed-ai@95b939cd tools/devops-agent/docs/hyperpod-mental-model.md). Without that block, or
    when it names none of this node's addresses (a stale copy), the group's instance <group>-1 is the primary, as AWS's
    multi-head setup script elects it (LifecycleScripts/base-config/multi_headnode_setup/headnode_setup.sh)."""
    slurm = resource_config.get("SlurmConfig") or {}
    if slurm.get("PrimaryControllerIp") in addresses:
        return "primary", "SlurmConfig.PrimaryControllerIp"
    if set(slurm.get("SecondaryControllerIps") or []) & set(addresses):
        return "backup", "SlurmConfig.SecondaryControllerIps"
    name = params.get("controller_group")
    group = next((g for g in resource_config.get("InstanceGroups", []) if g.get("Name") == name), None)
    instances = (group or {}).get("Instances") or []
    mine = next((i for i in instances if i.get("CustomerIpAddress") in addresses), None)
    if mine is None:
        raise ParamsError(f"none of this node's addresses ({' '.join(addresses) or 'none'}) is an instance of the "
                          f"controller group {name!r} in resource_config.json")
    if len(instances) == 1:
        return "primary", f"the only instance of {name}"
    first = f"{name}-1"
    if not any(i.get("InstanceName") == first for i in instances):
        raise ParamsError(f"the controller group {name!r} has {len(instances)} instances, no SlurmConfig block names "
                          f"this node, and none is named {first!r}: cannot tell the primary controller")
    role = "primary" if mine.get("InstanceName") == first else "backup"
    return role, f"instance {mine.get('InstanceName')} of {len(instances)}; {first} is the primary"


def main(argv):
    command, args = argv[1], argv[2:]
    if command == "validate":
        validate(load(args[0]))
    elif command == "get":  # get PARAMS KEY...: each KEY's scalar, one a line ("" for null or missing)
        params = load(args[0])
        values = [scalar(lookup(params, key)) for key in args[1:]]
        if len(values) > 1:  # one value a line: a value with a line break would shift the others
            for key, value in zip(args[1:], values):
                if "\n" in value or "\r" in value:
                    raise ParamsError(f"{key}: the value has a line break; read it on its own")
        print("\n".join(values))
    elif command == "node-type":
        print("\t".join(node_type(load(args[0]), load(args[1]), args[2:])))
    elif command == "controller-role":  # controller-role RESOURCE_CONFIG PARAMS ADDRESS...: primary|backup, why
        print("\t".join(controller_role(load(args[0]), load(args[1]), args[2:])))
    elif command == "users":
        for u in load(args[0]).get("users") or []:
            print(f"{u['name']}\t{u['uid']}\t{u['gid']}\t{scalar(bool(u.get('sudo')))}")
    elif command == "list":  # list PARAMS KEY: KEY's list of scalars, one a line (nothing when KEY is absent)
        items = lookup(load(args[0]), args[1])
        if not isinstance(items, (list, type(None))):
            raise ParamsError(f"{args[1]} is not a list")
        for item in items or []:
            print(scalar(item))
    elif command == "artifacts":  # artifacts PARAMS [SECTION]: container_runtime (default), node_metrics, ...
        section = load(args[0]).get(args[1] if len(args) > 1 else "container_runtime") or {}
        for a in section.get("artifacts") or []:
            print(f"{a['name']}\t{a['s3_uri']}\t{a['sha256']}")
    else:
        raise ParamsError(f"unknown command {command!r}")


if __name__ == "__main__":
    try:
        main(sys.argv)
    except ParamsError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
