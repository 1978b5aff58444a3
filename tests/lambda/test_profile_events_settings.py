"""profile_events.handler's Settings: read from the Lambda function's environment (its defaults, limits and the reserved
uids file). The handler itself: test_profile_events.py."""

from __future__ import annotations

import os

import pytest

from profile_events import Settings

from support.profile_answers import FS


def test_settings_come_from_the_environment(monkeypatch):
    for name, value in {
        "DOMAIN_ID": "d-x",
        "FILE_SYSTEM_ID": FS,
        "FILE_SYSTEM_PATH": "/data",
        "DATA_BUCKET": "b",
        "S3_PREFIX": "p/",
        "MAX_WAIT_SECONDS": "300",
        "PARTITION_ROOT": "home",
    }.items():
        monkeypatch.setenv(name, value)
    assert Settings.from_env(os.environ) == Settings("d-x", FS, "/data", "b", "p/", 300.0, "home")
    monkeypatch.delenv("PARTITION_ROOT")
    assert Settings.from_env(os.environ).partition_root == "studio"
    monkeypatch.delenv("DATA_BUCKET")
    with pytest.raises(RuntimeError, match="DATA_BUCKET"):
        Settings.from_env(os.environ)


def test_reserved_uids_come_from_the_file_the_environment_names(monkeypatch, tmp_path):
    (tmp_path / "reserved.json").write_text('{"20001": "alice"}')
    for name, value in {
        "DOMAIN_ID": "d-x",
        "FILE_SYSTEM_ID": FS,
        "FILE_SYSTEM_PATH": "/data",
        "DATA_BUCKET": "b",
        "RESERVED_UIDS_FILE": str(tmp_path / "reserved.json"),
    }.items():
        monkeypatch.setenv(name, value)
    assert Settings.from_env(os.environ).reserved_uids == {20001: "alice"}


def test_settings_defaults_and_limits_from_the_environment(monkeypatch):
    for name, value in {
        "DOMAIN_ID": "d-x",
        "FILE_SYSTEM_ID": FS,
        "FILE_SYSTEM_PATH": "/data",
        "DATA_BUCKET": "b",
        "PARTITION_ROOT": "/sandbox/",
        "MAX_IMPORTS_IN_FLIGHT": "2",
    }.items():
        monkeypatch.setenv(name, value)
    settings = Settings.from_env(os.environ)
    assert (
        settings.partition_root,
        settings.max_in_flight,
        settings.max_wait_seconds,
        settings.s3_prefix,
        settings.reserved_uids,
    ) == ("sandbox", 2, 600.0, "", {})
    for name in ("DOMAIN_ID", "FILE_SYSTEM_ID", "FILE_SYSTEM_PATH"):
        with monkeypatch.context() as missing:
            missing.delenv(name)
            with pytest.raises(RuntimeError, match=f"missing environment variables: {name}$"):
                Settings.from_env(os.environ)
