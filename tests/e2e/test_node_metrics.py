"""Real metrics end to end: the exporters and the Prometheus agent as a Slurm node runs them, remote-writing to a
local Prometheus receiver.

- Debian's prometheus-node-exporter on loopback, reading the textfile directory the project's collectors write;
- collectors/slurm_metrics.sh against the REAL slurmctld of a loopback cluster (tests/e2e/slurm_cluster.py) with a job
  running, and collectors/efa_metrics.sh against a sysfs tree holding the EFA driver's port counter names
  (constructs/node_metric_names.EFA_PORT_COUNTERS, cited there);
- Debian's prometheus in agent mode with the configuration lib/node_metrics.py generates on the nodes (remote_write
  with `sigv4`), credentials from dummy AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY so SigV4 signs;
- the receiver: Debian's prometheus with `--web.enable-remote-write-receiver`, which does not check the signature.

The test reads the receiver's HTTP API and fails unless every name in constructs/node_metric_names (NODE_EXPORTER,
SLURM, EFA) arrived with the node's labels. An agent without credentials delivers nothing: Prometheus resolves the SigV4
credentials when it loads the configuration and refuses it without them ("could not get SigV4 credentials:
NoCredentialProviders", Debian's 2.42.0), so the signing step is on the path.
With WRITE_NODE_METRICS_FACTS=1 it writes every metric name the receiver holds to tests/fixtures/node_metrics_seen.json.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from slurm_cluster import SLURM_BINARIES, SlurmCluster, run, wait_for
from support.ports import free_port
from slurm_root import in_root, missing as missing_in_root, skip_reason

from constructs import node_metric_names as node_metrics

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

LIFECYCLE = REPO / "lifecycle" / "hyperpod"
PARAMS_FIXTURE = REPO / "tests" / "lifecycle" / "fixtures" / "platform_parameters.json"
FACTS = REPO / "tests" / "fixtures" / "node_metrics_seen.json"
NODE_EXPORTER = shutil.which("prometheus-node-exporter")
PROMETHEUS = shutil.which("prometheus")
SCRAPE_SECONDS = 10  # the smallest observability.node_metrics.scrape_interval_seconds allows

missing = [b for b in ("prometheus", "prometheus-node-exporter") if shutil.which(b) is None]
pytestmark = pytest.mark.skipif(
    bool(missing or missing_in_root(SLURM_BINARIES)) or os.geteuid() != 0,
    reason=f"needs root and Debian's prometheus (missing {', '.join(missing) or 'nothing'}): "
    f"apt-get install prometheus prometheus-node-exporter; {skip_reason(SLURM_BINARIES)}",
)


def api(port: int, path: str, **query: str) -> dict:
    url = f"http://127.0.0.1:{port}{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
    with urllib.request.urlopen(url, timeout=10) as response:
        body = json.load(response)
    assert body["status"] == "success", body
    return body["data"]


def version(binary: str) -> str:
    result = run([binary, "--version"])
    return (result.stdout or result.stderr).splitlines()[0]


def up(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


class Metrics:
    def __init__(self, cluster: SlurmCluster, receiver: int, agent_conf: dict, unsigned_log: Path):
        self.cluster, self.receiver, self.agent_conf, self.unsigned_log = cluster, receiver, agent_conf, unsigned_log

    def names(self) -> set[str]:
        return set(api(self.receiver, "/api/v1/label/__name__/values"))

    def query(self, promql: str) -> list[dict]:
        return api(self.receiver, "/api/v1/query", query=promql)["result"]


@pytest.fixture(scope="module")
def metrics() -> Iterator[Metrics]:
    base = Path(tempfile.mkdtemp(prefix="node-metrics-"))
    base.chmod(0o755)
    cluster = SlurmCluster(base=base, cluster_name="metrics")
    try:
        cluster.start()
        job = run(
            in_root("sbatch", "--parsable", "--chdir=/tmp", "--output=/dev/null", "--wrap=sleep 600"), env=cluster.env()
        )
        assert job.returncode == 0, job.stderr

        # The textfile collectors, as their timers run them (controller: Slurm; compute with EFA: EFA). The Slurm one
        # runs below, once the job runs.
        textfile = base / "textfile"
        textfile.mkdir()
        sysfs = base / "infiniband"
        (base / "drivers" / "efa").mkdir(parents=True)
        counters = sysfs / "rdmap0s6" / "ports" / "1" / "hw_counters"
        counters.mkdir(parents=True)
        (sysfs / "rdmap0s6" / "device").mkdir()
        (sysfs / "rdmap0s6" / "device" / "driver").symlink_to(base / "drivers" / "efa")
        for i, counter in enumerate(node_metrics.EFA_PORT_COUNTERS):
            (counters / counter).write_text(f"{i * 4096}\n")
        collector_env = cluster.env(TEXTFILE_DIR=str(textfile), SYS_INFINIBAND=str(sysfs))

        def collect(collector: str) -> None:
            result = run(in_root("bash", str(LIFECYCLE / "collectors" / collector)), env=collector_env)
            assert result.returncode == 0, result.stdout + result.stderr

        collect("efa_metrics.sh")

        exporter_port, receiver_port, agent_port, unsigned_port = (free_port() for _ in range(4))
        # The flags install_node_metrics.sh writes to /etc/default/prometheus-node-exporter, on a free port.
        cluster.spawn(
            "node-exporter",
            [
                NODE_EXPORTER,
                f"--web.listen-address=127.0.0.1:{exporter_port}",
                f"--collector.textfile.directory={textfile}",
            ],
        )
        (base / "receiver.yml").write_text("scrape_configs: []\n")
        cluster.spawn(
            "receiver",
            [
                PROMETHEUS,
                f"--config.file={base / 'receiver.yml'}",
                f"--storage.tsdb.path={base / 'receiver-data'}",
                "--web.enable-remote-write-receiver",
                f"--web.listen-address=127.0.0.1:{receiver_port}",
            ],
        )

        params = json.loads(PARAMS_FIXTURE.read_text())
        params["node_metrics"] = {
            "remote_write_url": f"http://127.0.0.1:{receiver_port}/api/v1/write",
            "region": "us-west-2",
            "scrape_interval_seconds": SCRAPE_SECONDS,
            "artifacts": [],
        }
        (base / "platform_parameters.json").write_text(json.dumps(params))
        gen_env = {**os.environ, "NODE_EXPORTER_ADDRESS": f"127.0.0.1:{exporter_port}"}
        generated = run(
            [
                sys.executable,
                str(LIFECYCLE / "lib" / "node_metrics.py"),
                "agent-config",
                str(base / "platform_parameters.json"),
                "controller",
                "controller-machine",
                "no",
            ],
            env=gen_env,
        )
        assert generated.returncode == 0, generated.stderr
        (base / "agent.yml").write_text(generated.stdout)
        agent_conf = json.loads(generated.stdout)

        no_aws = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        signed = {**no_aws, "AWS_ACCESS_KEY_ID": "AKIAEXAMPLEDUMMY0000", "AWS_SECRET_ACCESS_KEY": "dummy-secret"}
        unsigned = {
            **no_aws,
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_CONFIG_FILE": "/nonexistent",
            "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent",
        }
        # The second agent differs only in its cluster label, so the receiver tells their series apart.
        (base / "unsigned-agent.yml").write_text(
            json.dumps({**agent_conf, "global": {**agent_conf["global"], "external_labels": {"cluster": "unsigned"}}})
        )
        # The agent as hyperpod-metrics-agent.service starts it; a second one without credentials cannot sign. They
        # start now: Prometheus 2.42 hands the scrape manager its targets on a 5 s tick, so the first scrape is 5 s
        # away at least, and the job's start (slurmctld schedules its first job ~3 s after it starts), the receiver's
        # and the Slurm collector fit in that time. Were the collector later, a scrape 10 s on would bring its metrics.
        for name, port, env in (("agent", agent_port, signed), ("unsigned-agent", unsigned_port, unsigned)):
            cluster.procs[name] = subprocess.Popen(
                [
                    PROMETHEUS,
                    "--enable-feature=agent",
                    f"--config.file={base / (name + '.yml')}",
                    f"--storage.agent.path={base / name}",
                    f"--web.listen-address=127.0.0.1:{port}",
                ],
                env=env,
                stdout=open(base / f"{name}.log", "w"),
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        wait_for("the receiver", lambda: up(receiver_port), timeout=60)
        wait_for(
            "the job to run",
            lambda: run(in_root("squeue", "-h", "-o", "%T"), env=cluster.env()).stdout.split() == ["RUNNING"],
            timeout=30,
        )
        collect("slurm_metrics.sh")
        yield Metrics(cluster, receiver_port, agent_conf, base / "unsigned-agent.log")
    finally:
        # The job's slurmstepd is no child of ours: cancel the job while slurmd runs, or its `sleep 600` outlives us.
        if "slurmd" in cluster.procs and cluster.procs["slurmd"].poll() is None:
            run(in_root("scancel", "--full", "--quiet", "--state=RUNNING", "--partition=debug"), env=cluster.env())
            try:
                wait_for(
                    "the job to end",
                    lambda: not run(in_root("squeue", "-h"), env=cluster.env()).stdout.strip(),
                    timeout=30,
                    interval=0.3,
                )
            except AssertionError:
                pass  # stopping the cluster comes first; a job left over ends with its sleep
        cluster.stop()
        if os.environ.get("KEEP_NODE_METRICS_LOGS"):
            print((base / "unsigned-agent.log").read_text()[-1500:], (base / "agent.log").read_text()[-800:])
        shutil.rmtree(base, ignore_errors=True)


def test_the_nodes_collectors_reach_the_receiver_through_the_generated_agent_configuration(metrics: Metrics):
    assert metrics.agent_conf["remote_write"][0]["sigv4"] == {"region": "us-west-2"}
    expected = set(node_metrics.NODE_EXPORTER + node_metrics.SLURM + node_metrics.EFA)
    seen = wait_for(
        "every listed metric at the receiver",
        lambda: (lambda n: n if expected <= n else None)(metrics.names()),
        timeout=120,
        interval=0.5,
    )
    assert expected <= seen, sorted(expected - seen)
    if os.environ.get("WRITE_NODE_METRICS_FACTS") == "1":
        FACTS.write_text(
            json.dumps(
                {
                    "generated_by": "WRITE_NODE_METRICS_FACTS=1 pytest tests/e2e/test_node_metrics.py",
                    "node_exporter": version(NODE_EXPORTER),
                    "prometheus": version(PROMETHEUS),
                    "metric_names": sorted(seen),
                },
                indent=1,
            )
            + "\n"
        )


def test_series_carry_the_node_labels(metrics: Metrics):
    wait_for("node_cpu_seconds_total", lambda: metrics.query("node_cpu_seconds_total"), timeout=120, interval=0.5)
    labels = metrics.query("node_cpu_seconds_total")[0]["metric"]
    assert {k: labels[k] for k in ("cluster", "node_type", "instance_group", "job")} == {
        "cluster": "ml-cluster",
        "node_type": "controller",
        "instance_group": "controller-machine",
        "job": "node",
    }
    assert set(node_metrics.LABELS) <= set(labels)


def test_slurm_metrics_come_from_the_real_slurmctld(metrics: Metrics):
    def value(promql: str) -> float | None:
        result = metrics.query(promql)
        return float(result[0]["value"][1]) if result else None

    wait_for(
        "slurm_jobs",
        lambda: value('slurm_jobs{partition="debug",state="running"}') is not None,
        timeout=120,
        interval=0.5,
    )
    assert value('slurm_jobs{partition="debug",state="running"}') == 1
    assert value('slurm_jobs{partition="debug",state="pending"}') == 0
    cpus = os.cpu_count() or 1
    assert value('slurm_cpus{partition="debug",state="total"}') == cpus
    assert value('slurm_cpus{partition="debug",state="allocated"}') == 1
    # one node, running the job: allocated (1 CPU of several) or mixed
    nodes = {r["metric"]["state"]: float(r["value"][1]) for r in metrics.query('slurm_nodes{partition="debug"}')}
    assert nodes == ({"mixed": 1.0} if cpus > 1 else {"allocated": 1.0}), nodes
    assert value("slurm_up") == 1


def test_efa_counters_arrive_as_counters_per_device_and_port(metrics: Metrics):
    wait_for("efa_tx_bytes_total", lambda: metrics.query("efa_tx_bytes_total"), timeout=120, interval=0.5)
    [sample] = metrics.query("efa_rx_bytes_total")
    assert sample["metric"]["device"] == "rdmap0s6" and sample["metric"]["port"] == "1"
    assert float(sample["value"][1]) == node_metrics.EFA_PORT_COUNTERS.index("rx_bytes") * 4096


def test_an_agent_that_cannot_sign_delivers_nothing(metrics: Metrics):
    """Both agents scrape the same exporter; the receiver accepts anything, so only the signing step can stop the
    second one (cluster label "unsigned"). Its log says why. The wait ends on an event, not a sleep: the unsigned
    agent has exited (Debian's 2.42.0 refuses the configuration at start, so it can never send), or, were it still
    running, the signed agent has delivered a sample scraped two intervals after the failure was seen."""
    wait_for(
        "the signed agent's series",
        lambda: metrics.query('node_load1{cluster="ml-cluster"}'),
        timeout=120,
        interval=0.5,
    )
    wait_for(
        "the unsigned agent to fail a send",
        lambda: "credential" in metrics.unsigned_log.read_text().lower(),
        timeout=120,
        interval=0.2,
    )
    failed_at = time.time()
    unsigned = metrics.cluster.procs["unsigned-agent"]

    def signed_sample_time() -> float:
        return max(
            (float(r["value"][1]) for r in metrics.query('timestamp(node_load1{cluster="ml-cluster"})')), default=0.0
        )

    wait_for(
        "the unsigned agent to exit, or two more scrapes of the signed one",
        lambda: unsigned.poll() is not None or signed_sample_time() >= failed_at + 2 * SCRAPE_SECONDS,
        timeout=120,
        interval=0.2,
    )
    assert metrics.query('node_load1{cluster="unsigned"}') == []
    assert metrics.query('count({cluster="unsigned"})') == []
