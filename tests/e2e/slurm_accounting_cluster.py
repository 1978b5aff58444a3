"""A loopback Slurm cluster with accounting, for tests: MariaDB, slurmdbd, slurmctld and a configless slurmd, with
their own ports and every file under one base directory (the only exception is munge's default socket directory,
which slurmd sees in a private mount namespace, as in test_studio_slurm_login.py).

Laid out as HyperPod's controller runs it: slurmdbd against a MariaDB on the same machine ("By default, SageMaker
HyperPod deploys MariaDB on your cluster's controller instance",
https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-external-accounting-db-slurm.html), and the
accounting settings in the `accounting.conf` that HyperPod's slurm.conf includes. Standard library only.
"""
from __future__ import annotations

import os
import secrets
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from slurm_conf import render_slurm_conf

REQUIRED_BINARIES = ("mariadbd", "mariadb-install-db", "mariadb", "slurmdbd", "slurmctld", "slurmd", "munged",
                     "sacctmgr", "sacct", "sshare", "sbatch", "scontrol", "squeue", "setpriv", "unshare")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


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
class AccountingCluster:
    base: Path
    cluster_name: str
    priority_weights: dict[str, int]
    procs: list[subprocess.Popen] = field(default_factory=list)
    conf: Path = Path()
    munge_socket: Path | None = None
    partition: str = "debug"
    # GPUs as HyperPod configures them (Gres=gpu:<type>:N on the node, a gres.conf beside slurm.conf), each backed by
    # an empty file standing in for /dev/nvidiaN, since this machine has no GPU.
    gpus: int = 0
    gpu_type: str = "a10g"

    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def _spawn(self, name: str, argv: list[str]) -> None:
        with open(self.base / f"{name}.stdout", "w") as log:
            self.procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))

    def _wait(self, what: str, check, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            for p in self.procs:
                if p.poll() is not None:
                    logs = "\n".join(f"{f.name}: {f.read_text()[-1500:]}" for f in sorted(self.base.glob("*.stdout")))
                    raise AssertionError(f"{p.args} exited with {p.returncode} while waiting for {what}:\n{logs}")
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}")
            time.sleep(0.3)

    def _start_database(self) -> tuple[int, str]:
        """A MariaDB of its own on a loopback port, and a password-protected user for slurmdbd."""
        data, sock = self.base / "mysql", self.base / "mysqld.sock"
        result = run(["mariadb-install-db", "--no-defaults", f"--datadir={data}", "--user=root",
                      "--auth-root-authentication-method=socket", "--skip-test-db"], timeout=120)
        assert result.returncode == 0, result.stdout + result.stderr
        port = free_port()
        self._spawn("mariadbd", ["mariadbd", "--no-defaults", f"--datadir={data}", f"--socket={sock}",
                                 f"--port={port}", "--bind-address=127.0.0.1", "--user=root", "--skip-log-bin",
                                 f"--pid-file={self.base / 'mariadbd.pid'}", "--innodb-buffer-pool-size=64M",
                                 f"--log-error={self.base / 'mariadbd.log'}"])
        password = secrets.token_hex(16)
        grant = (f"CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '{password}'; "
                 "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';")
        self._wait("MariaDB", lambda: run(["mariadb", f"--socket={sock}", "-u", "root", "-e", grant]).returncode == 0)
        return port, password

    def start(self, start_munged) -> None:
        """MariaDB, munged, slurmdbd, then slurmctld and slurmd; returns when the node is idle."""
        ctl = self.base / "ctl"
        (ctl / "state").mkdir(parents=True)
        db_port, password = self._start_database()
        key = ctl / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        self.munge_socket = start_munged(key, ctl / "munge", ctl)
        etc = ctl / "opt" / "slurm" / "etc"
        etc.mkdir(parents=True)
        dbd_port = free_port()
        dbd_conf = etc / "slurmdbd.conf"
        dbd_conf.write_text("\n".join([
            "AuthType=auth/munge", f"AuthInfo=socket={self.munge_socket}", "DbdHost=localhost", "DbdAddr=127.0.0.1",
            f"DbdPort={dbd_port}", "SlurmUser=root", "DebugLevel=info", f"LogFile={ctl / 'slurmdbd.log'}",
            f"PidFile={ctl / 'slurmdbd.pid'}", "StorageType=accounting_storage/mysql", "StorageHost=127.0.0.1",
            f"StoragePort={db_port}", "StorageUser=slurm", f"StoragePass={password}", "StorageLoc=slurm_acct_db",
        ]) + "\n")
        dbd_conf.chmod(0o600)
        self.conf = etc / "slurm.conf"
        slurmctld_port = free_port()
        self.conf.write_text(render_slurm_conf(
            cluster_name=self.cluster_name, hostname=socket.gethostname().split(".")[0], state_dir=ctl / "state",
            munge_socket=self.munge_socket, slurmctld_port=slurmctld_port, slurmd_port=free_port(),
            cpus=os.cpu_count() or 1, real_memory_mb=500, partition=self.partition,
            gres=f"gpu:{self.gpu_type}:{self.gpus}" if self.gpus else ""))
        if self.gpus:
            devices = ctl / "dev"
            devices.mkdir()
            for i in range(self.gpus):
                (devices / f"nvidia{i}").touch()
            (etc / "gres.conf").write_text(
                f"Name=gpu Type={self.gpu_type} File={devices}/nvidia[0-{self.gpus - 1}]\n")
        (etc / "accounting.conf").write_text(accounting_conf(dbd_port=dbd_port, munge_socket=self.munge_socket,
                                                             priority_weights=self.priority_weights))
        env = self.env()
        # slurmdbd reads the slurmdbd.conf beside the slurm.conf that SLURM_CONF names.
        self._spawn("slurmdbd", ["env", f"SLURM_CONF={self.conf}", "slurmdbd", "-D"])
        self._wait("slurmdbd", lambda: run(["sacctmgr", "-n", "-P", "show", "cluster"], env=env).returncode == 0)
        Path("/run/munge").mkdir(parents=True, exist_ok=True)
        self._spawn("slurmctld", ["slurmctld", "-D", "-f", str(self.conf)])
        self._spawn("slurmd", ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                               'mount --bind "$0" /run/munge && exec slurmd -D --conf-server "$1"',
                               str(self.munge_socket.parent), f"127.0.0.1:{slurmctld_port}"])
        self._wait("the node to be idle",
                   lambda: run(["sinfo", "-h", "-o", "%T"], env=env).stdout.split() == ["idle"])

    def stop(self) -> None:
        for p in reversed(self.procs):
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if self.munge_socket is not None:
            run(["munged", f"--socket={self.munge_socket}", "--stop"])
