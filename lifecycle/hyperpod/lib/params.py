#!/usr/bin/env python3
"""Reads provisioning_parameters.json and resource_config.json for the shell scripts.

Standard library only: it runs on a fresh HyperPod node before anything is installed.
Output is one value or one record per line, tab-separated, so bash can `read` it.
Errors go to stderr as a single line and exit with status 2.
"""

import json
import os
import re
import sys

# The file's one definition is constructs/node_parameters.py; this is the JSON Schema generated from it (make schema),
# shipped beside this script. `validate` checks the file against it with the subset of JSON Schema the generator
# emits (schema_problems), standard library only.
SCHEMA_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "platform_parameters.schema.json")
TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


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


def has_type(value, name):
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, TYPES[name])


def schema_problems(value, schema, root, path=""):
    """Every way `value` breaks `schema`, each as '<path>: <what>'. The keywords the generator emits: $ref (to
    #/$defs), if/then/else, anyOf, allOf, type, const, enum, pattern, minLength, minimum, properties, required,
    additionalProperties (a map's values), items; `x-message` words a failed rule."""
    problems = []
    where = path or "(the file)"

    def fail(what):
        problems.append(f"{where}: {schema.get('x-message', what)}, got {value!r}")

    if "$ref" in schema:
        name = schema["$ref"].removeprefix("#/$defs/")
        problems += schema_problems(value, root["$defs"][name], root, path)
    if "if" in schema:
        branch = "else" if schema_problems(value, schema["if"], root, path) else "then"
        if branch in schema:
            problems += schema_problems(value, schema[branch], root, path)
    for sub in schema.get("allOf", []):
        problems += schema_problems(value, sub, root, path)
    if "anyOf" in schema:
        tried = [schema_problems(value, sub, root, path) for sub in schema["anyOf"]]
        if all(tried):  # report the branch of the value's type (a null where an object goes: the object's problems)
            typed = [t for sub, t in zip(schema["anyOf"], tried) if "type" not in sub or has_type(value, sub["type"])]
            problems += (typed or [t for sub, t in zip(schema["anyOf"], tried) if sub.get("type") != "null"])[0]
    if "type" in schema and not has_type(value, schema["type"]):
        fail(f"must be of type {schema['type']}")
        return problems
    if "const" in schema and (value != schema["const"] or type(value) is not type(schema["const"])):
        problems.append(f"{where}: {schema.get('x-message', 'expected ' + json.dumps(schema['const']))}, got {value!r}")
    if "enum" in schema and value not in schema["enum"]:
        fail("expected one of " + ", ".join(json.dumps(v) for v in schema["enum"]))
    if isinstance(value, str):
        if "pattern" in schema and not re.search(schema["pattern"], value):
            fail(f"must match {schema['pattern']}")
        if len(value) < schema.get("minLength", 0):
            fail("missing" if schema["minLength"] == 1 else f"must have at least {schema['minLength']} characters")
    if has_type(value, "number") and "minimum" in schema and value < schema["minimum"]:
        fail(f"must be >= {schema['minimum']}")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                problems.append(f"{path + '.' if path else ''}{key}: missing")
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")  # the schema of a map's values; other keys are ignored
        for key, item in value.items():
            inner = f"{path}.{key}" if path else key
            if key in properties:
                problems += schema_problems(item, properties[key], root, inner)
            elif isinstance(extra, dict):
                problems += schema_problems(item, extra, root, inner)
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            problems += schema_problems(item, schema["items"], root, f"{path}[{i}]")
    return problems


def validate(params, schema_file=SCHEMA_FILE):
    schema = load(schema_file)
    problems = list(dict.fromkeys(schema_problems(params, schema, schema)))  # once each, in order
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
        raise ParamsError(
            f"none of this node's addresses ({' '.join(addresses) or 'none'}) is an instance of the "
            f"controller group {name!r} in resource_config.json"
        )
    if len(instances) == 1:
        return "primary", f"the only instance of {name}"
    first = f"{name}-1"
    if not any(i.get("InstanceName") == first for i in instances):
        raise ParamsError(
            f"the controller group {name!r} has {len(instances)} instances, no SlurmConfig block names "
            f"this node, and none is named {first!r}: cannot tell the primary controller"
        )
    role = "primary" if mine.get("InstanceName") == first else "backup"
    return role, f"instance {mine.get('InstanceName')} of {len(instances)}; {first} is the primary"


def get_output(params, keys):
    """What `get PARAMS KEY...` prints: each KEY's scalar, one a line ("" for null or missing)."""
    values = [scalar(lookup(params, key)) for key in keys]
    if len(values) > 1:  # one value a line: a value with a line break would shift the others
        for key, value in zip(keys, values):
            if "\n" in value or "\r" in value:
                raise ParamsError(f"{key}: the value has a line break; read it on its own")
    return "\n".join(values) + "\n"


# The commands that print lines, as generators of lines: the command writes each as it comes (a malformed entry fails
# after the lines before it, as it always has), the snapshot joins them.
def users_lines(params):
    for u in params.get("users") or []:
        yield f"{u['name']}\t{u['uid']}\t{u['gid']}\t{scalar(bool(u.get('sudo')))}\n"


def list_lines(params, key):
    items = lookup(params, key)
    if not isinstance(items, (list, type(None))):
        raise ParamsError(f"{key} is not a list")
    for item in items or []:
        yield scalar(item) + "\n"


def artifacts_lines(params, section="container_runtime"):
    for a in (params.get(section) or {}).get("artifacts") or []:
        yield f"{a['name']}\t{a['s3_uri']}\t{a['sha256']}\n"


SNAPSHOT_KEY = re.compile(r"[A-Za-z0-9_-]+")


def snapshot(params):
    """Every answer `get`, `list`, `users` and `artifacts` would give for `params`, for lib/common.sh to keep in memory
    (one Python start for all of a script's reads): NUL-separated pairs, the question then what the command prints.
    The questions: `get KEY` and `list KEY` for every KEY path through objects whose command succeeds, `path KEY` for
    every such path (a KEY that is none answers as a missing one: "" and nothing), `users`, and `artifacts SECTION`
    for every top-level key. A question whose command fails has no answer: the shell asks params.py, which fails as
    before. A file with a key the shell cannot hold safely (not [A-Za-z0-9_-]) gets no snapshot (empty output)."""
    answers = {}

    def ask(question, command, *args):
        try:
            answer = command(*args)
            answer = answer if isinstance(answer, str) else "".join(answer)
        except (ParamsError, KeyError, TypeError, AttributeError):  # what the command meets in a file: its own to say
            return
        answers[question] = answer

    def walk(node, prefix):
        for key, value in node.items():
            if not SNAPSHOT_KEY.fullmatch(key):
                raise ParamsError(f"key {key!r}")
            path = prefix + key
            answers["path " + path] = ""
            ask("get " + path, get_output, params, [path])
            ask("list " + path, list_lines, params, path)
            if isinstance(value, dict):
                walk(value, path + ".")

    if isinstance(params, dict):
        try:
            walk(params, "")
        except ParamsError:
            return ""
        for section in params:
            ask("artifacts " + section, artifacts_lines, params, section)
    ask("users", users_lines, params)
    return "".join(f"{q}\0{a}\0" for q, a in answers.items() if "\0" not in a)


def main(argv):
    command, args = argv[1], argv[2:]
    if command == "validate":  # validate PARAMS [--snapshot]: nothing, or (valid) the snapshot
        params = load(args[0])
        validate(params)
        if args[1:] == ["--snapshot"]:
            sys.stdout.write(snapshot(params))
    elif command == "snapshot":  # snapshot PARAMS: see snapshot()
        sys.stdout.write(snapshot(load(args[0])))
    elif command == "get":  # get PARAMS KEY...
        sys.stdout.write(get_output(load(args[0]), args[1:]))
    elif command == "node-type":
        print("\t".join(node_type(load(args[0]), load(args[1]), args[2:])))
    elif command == "controller-role":  # controller-role RESOURCE_CONFIG PARAMS ADDRESS...: primary|backup, why
        print("\t".join(controller_role(load(args[0]), load(args[1]), args[2:])))
    elif command == "users":
        sys.stdout.writelines(users_lines(load(args[0])))
    elif command == "list":  # list PARAMS KEY: KEY's list of scalars, one a line (nothing when KEY is absent)
        sys.stdout.writelines(list_lines(load(args[0]), args[1]))
    elif command == "artifacts":  # artifacts PARAMS [SECTION]: container_runtime (default), node_metrics, ...
        sys.stdout.writelines(artifacts_lines(load(args[0]), *args[1:2]))
    else:
        raise ParamsError(f"unknown command {command!r}")


if __name__ == "__main__":
    try:
        main(sys.argv)
    except ParamsError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
