"""A loopback Slurm cluster shaped like a HyperPod controller, shared by the e2e tests.

munged with a fresh key, a HyperPod-shaped /opt/slurm/etc under `base` (slurm.conf from slurm_conf.render_slurm_conf
with `enable_configless` and `include accounting.conf`, an empty plugstack.conf), slurmctld, and a configless slurmd
(`slurmd --conf-server`) as HyperPod starts them. Before it has a config, slurmd authenticates through munge's
default socket, /run/munge/munge.socket.2: in a private mount namespace that directory is this cluster's munge
directory, so the machine's is untouched.

Parameters:
- `accounting`: False (default) writes the "none" accounting.conf; True also runs a MariaDB of its own and slurmdbd
  (as HyperPod's controller does: "By default, SageMaker HyperPod deploys MariaDB on your cluster's controller
  instance", https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-external-accounting-db-slurm.html)
  with enforced associations, limits and QoS and multifactor priority with `priority_weights`.
- `partition`, `gpus`, `gpu_type`: the node's partition, and GPUs as HyperPod configures them (Gres=gpu:<type>:N on
  the node, a gres.conf beside slurm.conf), each backed by an empty file standing in for /dev/nvidiaN, since the test
  machine has no GPU.
- auth: the daemons always start with auth/munge, as HyperPod's do. Per-user mode (auth/jwt) is what the project's
  configure_slurm_auth.sh adds to accounting.conf; Slurm 22.05 loads a new auth plugin only at start, hence
  `restart_slurmctld()`.

Every file (state, spool, logs, pid files, sockets) is under `base`. Standard library only.
"""
from __future__ import annotations

import os
import secrets
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from slurm_conf import ACCOUNTING_CONF, render_slurm_conf

SLURM_BINARIES = ("munged", "munge", "slurmctld", "slurmd", "sinfo", "squeue", "sbatch", "scontrol", "unshare")
ACCOUNTING_BINARIES = ("mariadbd", "mariadb-install-db", "mariadb", "slurmdbd", "sacctmgr", "sacct", "sshare")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def wait_for(what: str, check, timeout: float, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def start_munged(key: Path, run_dir: Path, state_dir: Path) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    run_dir.chmod(0o755)  # munged insists that every user can reach its socket
    sock = run_dir / "munge.socket.2"  # munge's default name: configless slurmd asks the default socket first
    result = run(["munged", f"--key-file={key}", f"--socket={sock}", f"--pid-file={run_dir / 'munged.pid'}",
                  f"--log-file={state_dir / 'munged.log'}", f"--seed-file={state_dir / 'munged.seed'}"])
    assert result.returncode == 0, result.stderr
    return sock


def accounting_conf(*, dbd_port: int, munge_socket: Path, priority_weights: dict[str, int]) -> str:
    """Enforced associations, limits and QoS, gres/gpu tracked, multifactor priority with the config's weights."""
    lines = ["AccountingStorageType=accounting_storage/slurmdbd", "AccountingStorageHost=127.0.0.1",
             f"AccountingStoragePort={dbd_port}",
             # With slurmdbd this names the munge socket that authenticates to it (slurm.conf(5)).
             f"AccountingStoragePass={munge_socket}",
             "AccountingStorageEnforce=associations,limits,qos,safe", "AccountingStorageTRES=gres/gpu",
             "JobAcctGatherType=jobacct_gather/linux", "PriorityType=priority/multifactor",
             *(f"{k}={v}" for k, v in priority_weights.items())]
    return "\n".join(lines) + "\n"


@dataclass
class SlurmCluster:
    base: Path
    cluster_name: str
    accounting: bool = False
    priority_weights: dict[str, int] = field(default_factory=dict)
    partition: str = "debug"
    gpus: int = 0
    gpu_type: str = "a10g"
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    munge_socket: Path | None = None
    # False: HyperPod's slurm.conf without the include line (node_contract.json, slurm-conf-includes-accounting-conf)
    include_accounting_conf: bool = True

    @property
    def ctl(self) -> Path:
        return self.base / "ctl"

    @property
    def etc(self) -> Path:
        return self.ctl / "opt" / "slurm" / "etc"

    @property
    def conf(self) -> Path:
        return self.etc / "slurm.conf"

    @property
    def munge_key(self) -> Path:
        return self.ctl / "munge.key"

    @property
    def state(self) -> Path:
        return self.ctl / "state"

    def env(self, **extra: str) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf), **extra}

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = open(self.ctl / f"{name}.stdout", "a")
        self.procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def _alive(self, what: str) -> None:
        for p in self.procs.values():
            if p.poll() is not None:
                logs = "\n".join(f"{f.name}: {f.read_text()[-1500:]}" for f in sorted(self.ctl.glob("*.stdout")))
                raise AssertionError(f"{p.args} exited with {p.returncode} while waiting for {what}:\n{logs}")

    def _wait(self, what: str, check, timeout: float = 60) -> None:
        def alive_and(check=check):
            self._alive(what)
            return check()
        wait_for(what, alive_and, timeout=timeout, interval=0.3)

    def node_idle(self) -> bool:
        self._alive("the node to be idle")
        return run(["sinfo", "-h", "-o", "%T"], env=self.env()).stdout.split() == ["idle"]

    def _start_database(self) -> tuple[int, str]:
        """A MariaDB of its own on a loopback port, and a password-protected user for slurmdbd."""
        data, sock = self.ctl / "mysql", self.ctl / "mysqld.sock"
        result = run(["mariadb-install-db", "--no-defaults", f"--datadir={data}", "--user=root",
                      "--auth-root-authentication-method=socket", "--skip-test-db"])
        assert result.returncode == 0, result.stdout + result.stderr
        port = free_port()
        self._spawn("mariadbd", ["mariadbd", "--no-defaults", f"--datadir={data}", f"--socket={sock}",
                                 f"--port={port}", "--bind-address=127.0.0.1", "--user=root", "--skip-log-bin",
                                 f"--pid-file={self.ctl / 'mariadbd.pid'}", "--innodb-buffer-pool-size=64M",
                                 f"--log-error={self.ctl / 'mariadbd.log'}"])
        password = secrets.token_hex(16)
        grant = (f"CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '{password}'; "
                 "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';")
        self._wait("MariaDB", lambda: run(["mariadb", f"--socket={sock}", "-u", "root", "-e", grant]).returncode == 0)
        return port, password

    def _start_slurmdbd(self) -> None:
        """MariaDB, slurmdbd.conf and the accounting.conf slurm.conf includes (sacctmgr reads it), then slurmdbd."""
        db_port, password = self._start_database()
        dbd_port = free_port()
        dbd_conf = self.etc / "slurmdbd.conf"
        dbd_conf.write_text("\n".join([
            "AuthType=auth/munge", f"AuthInfo=socket={self.munge_socket}", "DbdHost=localhost", "DbdAddr=127.0.0.1",
            f"DbdPort={dbd_port}", "SlurmUser=root", "DebugLevel=info", f"LogFile={self.ctl / 'slurmdbd.log'}",
            f"PidFile={self.ctl / 'slurmdbd.pid'}", "StorageType=accounting_storage/mysql", "StorageHost=127.0.0.1",
            f"StoragePort={db_port}", "StorageUser=slurm", f"StoragePass={password}", "StorageLoc=slurm_acct_db",
        ]) + "\n")
        dbd_conf.chmod(0o600)
        (self.etc / "accounting.conf").write_text(accounting_conf(
            dbd_port=dbd_port, munge_socket=self.munge_socket, priority_weights=self.priority_weights))
        # slurmdbd reads the slurmdbd.conf beside the slurm.conf that SLURM_CONF names.
        self._spawn("slurmdbd", ["env", f"SLURM_CONF={self.conf}", "slurmdbd", "-D"])
        self._wait("slurmdbd", lambda: run(["sacctmgr", "-n", "-P", "show", "cluster"], env=self.env()).returncode == 0)

    def start(self) -> None:
        """munged, (MariaDB and slurmdbd), slurmctld and slurmd; returns when the node is idle."""
        self.state.mkdir(parents=True)
        self.munge_key.write_bytes(os.urandom(1024))
        self.munge_key.chmod(0o400)
        self.munge_socket = start_munged(self.munge_key, self.ctl / "munge", self.ctl)
        self.etc.mkdir(parents=True)
        self.slurmctld_port = free_port()
        self.conf.write_text(render_slurm_conf(
            cluster_name=self.cluster_name, hostname=socket.gethostname().split(".")[0], state_dir=self.state,
            munge_socket=self.munge_socket, slurmctld_port=self.slurmctld_port, slurmd_port=free_port(),
            cpus=os.cpu_count() or 1, real_memory_mb=500, partition=self.partition,
            gres=f"gpu:{self.gpu_type}:{self.gpus}" if self.gpus else "",
            include_accounting_conf=self.include_accounting_conf))
        if self.gpus:
            devices = self.ctl / "dev"
            devices.mkdir()
            for i in range(self.gpus):
                (devices / f"nvidia{i}").touch()
            (self.etc / "gres.conf").write_text(
                f"Name=gpu Type={self.gpu_type} File={devices}/nvidia[0-{self.gpus - 1}]\n")
        (self.etc / "plugstack.conf").write_text("")  # HyperPod's own SPANK entries would be here
        if self.accounting:
            self._start_slurmdbd()
        else:
            (self.etc / "accounting.conf").write_text(ACCOUNTING_CONF)
        Path("/run/munge").mkdir(parents=True, exist_ok=True)
        self._spawn("slurmctld", ["slurmctld", "-D", "-f", str(self.conf)])
        self._spawn("slurmd", ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                               'mount --bind "$0" /run/munge && exec slurmd -D --conf-server "$1"',
                               str(self.munge_socket.parent), f"127.0.0.1:{self.slurmctld_port}"])
        self._wait("the node to be idle", self.node_idle)

    def restart_slurmctld(self) -> None:
        p = self.procs.pop("slurmctld")
        p.terminate()
        p.wait(timeout=30)
        self._spawn("slurmctld", ["slurmctld", "-D", "-f", str(self.conf)])
        self._wait("slurmctld after the restart", self.node_idle)

    def spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        """Another process stopped with the cluster (moto server, a Prometheus); output in ctl/<name>.stdout."""
        self._spawn(name, argv)
        return self.procs[name]

    def stop(self) -> None:
        for p in reversed(list(self.procs.values())):
            p.terminate()
        for p in self.procs.values():
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if self.munge_socket is not None:
            run(["munged", f"--socket={self.munge_socket}", "--stop"])
