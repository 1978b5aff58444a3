"""End to end on REAL Slurm: HyperPod's boot order, where slurmctld may start after OnInitComplete has begun.

AWS's detect-node extension says lifecycle scripts "can run before or in parallel with Slurm service startup"
(awslabs/awsome-distributed-ai@95b939cd 1.architectures/5.sagemaker-hyperpod/Extensions/detect-node/README.md;
lifecycle/node_contract.json, slurmctld-starts-in-parallel). Here the controller steps that talk to slurmctld run
against the loopback cluster of tests/e2e/slurm_cluster.py while its slurmctld is stopped:

- it starts a few seconds later: every step waits (logged) and then does its work against the real daemon;
- it never starts: the first step fails with one ERROR line, bounded, and an entry point built like
  on_init_complete.sh (start_log, step) ends its log with STEP-FAILED and exits only LOG_FLUSH_SECONDS later.

The steps, the daemons and every Slurm command run in the Slurm 24.11 root (tests/e2e/slurm_root.py: `in_root`).

Needs root and the Slurm root (`make slurm-root`; `make test` builds it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurm_cluster import SLURM_BINARIES, SlurmCluster, run, wait_for
from slurm_root import in_root, missing as missing_in_root, skip_reason

REPO = Path(__file__).resolve().parents[2]

HYPERPOD = REPO / "lifecycle" / "hyperpod"

pytestmark = pytest.mark.skipif(
    bool(missing_in_root(SLURM_BINARIES)) or os.geteuid() != 0, reason=f"needs root; {skip_reason(SLURM_BINARIES)}"
)

# The controller steps of on_init_complete.sh that talk to slurmctld, in its order (configure_slurm.sh talks to it only
# when plugstack.conf changes, which needs pyxis: tests/lifecycle/configure_slurm.bats covers its wait).
CONTROLLER_STEPS = [
    ["apply_accounting.sh"],
    ["configure_slurm_auth.sh"],
    ["configure_pam_adopt.sh", "controller"],
    ["check_gres.sh"],
]


@pytest.fixture(scope="module")
def cluster() -> Iterator[SlurmCluster]:
    base = Path(tempfile.mkdtemp(prefix="slurm-boot-order-"))
    base.chmod(0o755)
    cluster = SlurmCluster(base=base, cluster_name="bootorder")
    (base / "platform_parameters.json").write_text(
        json.dumps(
            {
                "version": 1,
                "slurm": {"auth": "munge", "pam_slurm_adopt": True},
                # a GPU group, so check_gres.sh asks slurmctld (this node has no GRES: a warning, not a failure)
                "worker_groups": [{"instance_group_name": "workers", "partition_name": "debug", "gpus": 1}],
            }
        )
    )
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        shutil.rmtree(base, ignore_errors=True)


def script_env(cluster: SlurmCluster, **extra: str) -> dict[str, str]:
    return cluster.env(
        PARAMS_FILE=str(cluster.base / "platform_parameters.json"),
        SLURM_CONF_DIR=str(cluster.etc),
        LOG_DIR=str(cluster.base / "log"),
        STATE_DIR=str(cluster.base / "platform-state"),
        RETRY_DELAY="1",
        **extra,
    )


def controller_steps(cluster: SlurmCluster, **extra: str) -> subprocess.Popen:
    """The steps one after the other, as on_init_complete.sh runs them, in the background (in the root, as the
    controller); output in one file."""
    chain = " && ".join(f"bash {HYPERPOD / step[0]} {' '.join(step[1:])}" for step in CONTROLLER_STEPS)
    out = open(cluster.base / "steps.out", "w")
    return subprocess.Popen(
        in_root("bash", "-c", chain),
        env=script_env(cluster, **extra),
        stdout=out,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )


def stop_slurmctld(cluster: SlurmCluster) -> list[str]:
    """Stops slurmctld; returns the command line the harness started it with, to start it again the same way."""
    argv = list(cluster.procs["slurmctld"].args)
    cluster.stop_primary()
    return argv


def start_slurmctld_again(cluster: SlurmCluster, argv: list[str]) -> None:
    cluster.spawn("slurmctld", argv)
    wait_for("slurmctld to listen", cluster.slurmctld_listening, timeout=60)


def test_a_slurmctld_that_starts_late_is_waited_for_by_every_controller_step(cluster: SlurmCluster):
    argv = stop_slurmctld(cluster)  # slurmctld not started yet, as while HyperPod's unit comes up
    steps = controller_steps(cluster, SLURM_WAIT_ATTEMPTS="60")
    out = cluster.base / "steps.out"
    try:
        wait_for(
            "the first step to wait for slurmctld",
            lambda: "waiting for slurmctld to answer" in out.read_text(),
            timeout=60,
        )
        time.sleep(2)  # a few more unanswered checks
        assert steps.poll() is None, out.read_text()
    finally:
        start_slurmctld_again(cluster, argv)
    assert steps.wait(timeout=120) == 0, out.read_text()
    text = out.read_text()
    assert "[apply_accounting] waiting for slurmctld to answer before reading its configuration" in text
    assert "[apply_accounting] slurmctld answered after " in text
    assert text.count("waiting for slurmctld") == 1, text  # the later steps find it answering
    # Each did its work against the real daemon: DisableRootJobs through reconfigure, GRES read from slurmctld.
    config = run(in_root("scontrol", "show", "config"), env=cluster.env()).stdout
    # 22.05 printed "Yes", 24.11 prints "yes"
    assert any(line.lower().split() == ["disablerootjobs", "=", "yes"] for line in config.splitlines()), config
    assert "PrologFlags=Contain" in (cluster.etc / "accounting.conf").read_text()
    assert "[check_gres] WARNING: workers has 1 GPU(s) per node but slurmctld's GresTypes is" in text
    cluster.wait_node_idle()


def test_a_slurmctld_that_never_starts_fails_the_node_with_one_line_after_the_log_is_complete(cluster: SlurmCluster):
    argv = stop_slurmctld(cluster)
    log = cluster.base / "log" / "node.log"
    # An entry point built as on_init_complete.sh is: start_log, then each sub-script as a step.
    entry = (
        f"set -euo pipefail; source {HYPERPOD}/lib/common.sh; start_log node; "
        f"step apply_accounting bash {HYPERPOD}/apply_accounting.sh"
    )
    started = time.monotonic()
    node = subprocess.Popen(
        in_root("bash", "-c", entry, "node"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=script_env(cluster, SLURM_WAIT_ATTEMPTS="3", LOG_FLUSH_SECONDS="3"),
    )
    try:
        wait_for(
            "the node's log to end with STEP-FAILED",
            lambda: log.exists() and "STEP-FAILED" in (log.read_text().splitlines() or [""])[-1],
            timeout=60,
        )
        assert node.poll() is None, "exited before waiting for its log to be shipped"
        assert node.wait(timeout=60) == 1
        assert time.monotonic() - started >= 3
        lines = log.read_text().splitlines()
        assert lines[-1].endswith("[node] STEP-FAILED apply_accounting rc=1"), lines
        errors = [line for line in lines if "ERROR" in line]
        assert len(errors) == 1, lines
        assert "[apply_accounting] ERROR: slurmctld did not answer `scontrol ping` within" in errors[0]
        assert "(3 checks, 1s apart), needed before reading its configuration" in errors[0]
    finally:
        start_slurmctld_again(cluster, argv)
        cluster.wait_node_idle()
