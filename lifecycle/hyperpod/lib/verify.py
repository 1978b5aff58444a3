#!/usr/bin/env python3
"""Checks what a node is about to run as root against the deploy's record (lib/verify.sh fetches it).

The record is the Secrets Manager secret constructs/lifecycle_scripts.py writes through CloudFormation, and that
only CloudFormation's execution role may change (docs/security.md, "The lifecycle record"):

    {"version": 1, "scripts": {"<relative path>": "<sha256>", ...}, "parameters": {...platform_parameters.json...},
     "parameter_digests": {"<key>": "<sha256 of its canonical JSON>", ...}}

(a parameter too large for the secret, e.g. a long users list, is recorded as a digest instead of its value.)

Commands (each prints what differed, one line per difference, to stderr, and exits 1 on any):
    download RECORD DIR PARAMS   every file the record lists is in DIR with its sha256; PARAMS holds the recorded
                                 parameters (compared as JSON values, key by key)
    parameters RECORD PARAMS     PARAMS holds the recorded parameters (the users sync's download)
    manifest DIR FILE...         prints "<sha256>  <FILE>" for each FILE of DIR (the node's own copy, at install)
    local MANIFEST DIR           every file MANIFEST lists is in DIR with its sha256, and neither the files nor any
                                 directory from DIR up to / is a link, not root's, or writable by group or others

Standard library only: it runs on a fresh node before anything is installed. Exit 2: the record itself is unusable.
"""

import hashlib
import os
import stat
import sys

# json is imported by the functions that read a record or parameters: `manifest` and `local`, which every install and
# users sync runs, read neither, and json (with the re it imports) is a third of this script's start.

SUPPORTED_VERSION = 1
# What the lifecycle prefix holds besides the scripts: the parameters (checked on their own) and nothing that runs.
NOT_SCRIPTS = ("platform_parameters.json",)


class RecordError(Exception):
    pass


def load_record(path):
    import json

    try:
        with open(path, encoding="utf-8") as f:
            record = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise RecordError(f"the lifecycle record is unreadable: {e}") from None
    if not isinstance(record, dict) or record.get("version") != SUPPORTED_VERSION:
        raise RecordError(f"the lifecycle record is not version {SUPPORTED_VERSION}")
    scripts, parameters = record.get("scripts"), record.get("parameters")
    if not isinstance(scripts, dict) or not scripts or not isinstance(parameters, dict):
        raise RecordError("the lifecycle record lists no scripts or no parameters")
    for name in scripts:
        parts = name.split("/")
        if name.startswith("/") or ".." in parts or "" in parts:
            raise RecordError(f"the lifecycle record names a path outside the scripts: {name!r}")
    return record


def sha256_of(path):
    """The file's sha256, read without following a link (O_NOFOLLOW); None when it is not a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        digest = hashlib.sha256()
        for block in iter(lambda: f.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


def script_differences(expected, directory):
    """One line per file whose bytes are not the recorded ones."""
    differences = []
    for name, digest in sorted(expected.items()):
        actual = sha256_of(os.path.join(directory, name))
        if actual is None:
            differences.append(f"{name}: missing or not a regular file (recorded sha256 {digest})")
        elif actual != digest:
            differences.append(f"{name}: sha256 {actual}, recorded {digest}")
    return differences


def unlisted_files(expected, directory):
    """Files in DIRECTORY the record does not list (nothing runs them; reported, not refused)."""
    found = []
    for root, dirs, files in os.walk(directory):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            relative = os.path.relpath(os.path.join(root, name), directory)
            if relative not in expected and relative not in NOT_SCRIPTS and not name.endswith(".md"):
                found.append(relative)
    return sorted(found)


def value_differences(recorded, actual, where="parameters"):
    """One line per key path whose value differs, e.g. `users[1].sudo: true here, false in the record`."""
    import json

    if isinstance(recorded, dict) and isinstance(actual, dict):
        out = []
        for key in sorted(set(recorded) | set(actual)):
            path = f"{where}.{key}"
            if key not in actual:
                out.append(f"{path}: missing here, {json.dumps(recorded[key])} in the record")
            elif key not in recorded:
                out.append(f"{path}: {json.dumps(actual[key])} here, not in the record")
            else:
                out.extend(value_differences(recorded[key], actual[key], path))
        return out
    if isinstance(recorded, list) and isinstance(actual, list) and len(recorded) == len(actual):
        out = []
        for i, (r, a) in enumerate(zip(recorded, actual)):
            out.extend(value_differences(r, a, f"{where}[{i}]"))
        return out
    if type(recorded) is type(actual) and recorded == actual:
        return []
    return [f"{where}: {json.dumps(actual)} here, {json.dumps(recorded)} in the record"]


def canonical_sha256(value):
    """The sha256 of a value's canonical JSON, as the deploy records a large parameter (constructs/lifecycle_scripts.py
    canonical_sha256)."""
    import json

    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def parameter_differences(record, params_path):
    """Recorded parameters verbatim compared key by key; those recorded as a digest (parameter_digests) by it."""
    import json

    try:
        with open(params_path, encoding="utf-8") as f:
            actual = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        return [f"{params_path}: unreadable ({e})"]
    if not isinstance(actual, dict):
        return [f"{params_path}: not a JSON object"]
    digests = record.get("parameter_digests") or {}
    differences = []
    for key, digest in sorted(digests.items()):
        if key not in actual:
            differences.append(f"parameters.{key}: missing here, recorded with sha256 {digest}")
        elif canonical_sha256(actual[key]) != digest:
            differences.append(f"parameters.{key}: sha256 {canonical_sha256(actual[key])} here, {digest} in the record")
    rest = {k: v for k, v in actual.items() if k not in digests}
    differences += value_differences(record["parameters"], rest)
    return [f"{params_path}: {line}" for line in differences]


def unsafe_path(path):
    """Why root should not trust PATH's content: a link, not root's, or writable by group or others; None if safe."""
    try:
        st = os.lstat(path)
    except OSError as e:
        return f"{path}: {e.strerror}"
    if stat.S_ISLNK(st.st_mode):
        return f"{path}: a symbolic link"
    if st.st_uid != 0:
        return f"{path}: owned by uid {st.st_uid}, not root"
    # A sticky directory (/tmp) lets others add names but not replace root's: safe on the way to a root-owned file.
    sticky_dir = stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not sticky_dir:
        return f"{path}: writable by group or others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def local_differences(manifest_path, directory):
    problem = unsafe_path(manifest_path)
    problems = [problem] if problem else []
    expected = {}
    try:
        with open(manifest_path, encoding="utf-8") as f:
            for line in f:
                digest, _, name = line.rstrip("\n").partition("  ")
                expected[name] = digest
    except OSError as e:
        return [f"{manifest_path}: {e.strerror}"]
    if not expected:
        return [f"{manifest_path}: lists no files"]
    directory = os.path.abspath(directory)
    for name in sorted(expected):
        problem = unsafe_path(os.path.join(directory, name))
        if problem:
            problems.append(problem)
    parents = {os.path.dirname(os.path.join(directory, name)) for name in expected}
    seen = set()
    for parent in sorted(parents):
        while parent not in seen:
            seen.add(parent)
            problem = unsafe_path(parent)
            if problem:
                problems.append(problem)
            if parent == "/":
                break
            parent = os.path.dirname(parent)
    return problems + script_differences(expected, directory)


def main(argv):
    command, args = (argv[1], argv[2:]) if len(argv) > 1 else ("", [])
    try:
        if command == "download" and len(args) == 3:
            record = load_record(args[0])
            differences = script_differences(record["scripts"], args[1])
            differences += parameter_differences(record, args[2])
            for name in unlisted_files(record["scripts"], args[1]):
                print(
                    f"WARNING: {name} is not in the lifecycle record; nothing of the platform runs it", file=sys.stderr
                )
        elif command == "parameters" and len(args) == 2:
            differences = parameter_differences(load_record(args[0]), args[1])
        elif command == "manifest" and len(args) >= 2:
            for name in args[1:]:
                digest = sha256_of(os.path.join(args[0], name))
                if digest is None:
                    print(f"{name}: missing or not a regular file", file=sys.stderr)
                    return 1
                print(f"{digest}  {name}")
            return 0
        elif command == "local" and len(args) == 2:
            differences = local_differences(args[0], args[1])
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except RecordError as e:
        print(e, file=sys.stderr)
        return 2
    for line in differences:
        print(line, file=sys.stderr)
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
