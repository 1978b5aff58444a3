"""A loopback Slurm cluster shaped like a HyperPod controller, shared by the e2e tests.

Every daemon runs from the Debian 13 root with Slurm 24.11, HyperPod's release (tests/e2e/slurm_root.py: `in_root`),
with this cluster's files at the same paths inside and outside it; a test runs the Slurm commands and the scripts
that use them through `in_root(...)` as well.

munged with a fresh key, a HyperPod-shaped /opt/slurm/etc under `base` (slurm.conf from slurm_conf.render_slurm_conf
with `enable_configless` and `include accounting.conf`, an empty plugstack.conf), slurmctld, and a configless slurmd
(`slurmd --conf-server`) as HyperPod starts them. Before it has a config, slurmd authenticates through munge's
default socket, /run/munge/munge.socket.2: in a private mount namespace that directory is this cluster's munge
directory, so the machine's is untouched.

Parameters:
- `accounting`: False (default) writes the "none" accounting.conf; True also runs a MariaDB of its own and slurmdbd
  (as HyperPod's controller does: "By default, SageMaker HyperPod deploys MariaDB on your cluster's controller
  instance", https://docs.aws.amazon.com/sagemaker/latest/dg/sagemaker-hyperpod-external-accounting-db-slurm.html)
  with enforced associations, limits and QoS and multifactor priority with `priority_weights`. slurmdbd is reached on
  a loopback address of the cluster's own whose route acknowledges at once (`quickack_address`).
- `partition`, `gpus`, `gpu_type`: the node's partition, and GPUs as HyperPod configures them (Gres=gpu:<type>:N on
  the node, a gres.conf beside slurm.conf), each backed by an empty file standing in for /dev/nvidiaN, since the test
  machine has no GPU.
- `backup_controllers`: N > 0 runs N more slurmctld as backups of the first (a HyperPod multi-head controller group:
  `SlurmctldHost` once per controller, one StateSaveLocation they share, configless slurmd given every controller).
  Each backup runs in a network namespace of its own joined to this one by a veth pair (slurmctld binds its port on
  every address, so two cannot share a namespace), with its own host name (UTS namespace; slurmctld finds its place
  in the list by name) and its own pid and log directory. The primary, slurmd and the clients use the host end's
  address. `stop_primary()` stops the first controller; the backups take over after `slurmctld_timeout` seconds.
- `scheduler_parameters`: SchedulerParameters, `BATCH_SCHEDULING` unless given (a batch job is scheduled when
  submitted).
- `proctrack_type`: ProctrackType, proctrack/linuxproc unless given; proctrack/cgroup (Slurm 24.11's default, what
  pam_slurm_adopt adopts sessions into) also writes `slurm_conf.CGROUP_CONF` as cgroup.conf, which configless slurmd
  fetches with slurm.conf. slurmd then needs a writable cgroup hierarchy at /sys/fs/cgroup.
- auth: the daemons always start with auth/munge, as HyperPod's do. Per-user mode (auth/jwt) is what the project's
  configure_slurm_auth.sh adds to accounting.conf; Slurm 24.11 loads it on `scontrol reconfigure` (22.05 loaded a
  new auth plugin only at start, which `restart_slurmctld()` was for; it stays for any test that restarts slurmctld).

Every file (state, spool, logs, pid files, sockets) is under `base`. Standard library only.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from slurm_conf import ACCOUNTING_CONF, CGROUP_CONF, render_slurm_conf
from slurm_root import DATABASE_ROOT, in_root

from support.ports import free_port

SLURM_BINARIES = ("munged", "munge", "slurmctld", "slurmd", "sinfo", "squeue", "sbatch", "scontrol", "unshare")
ACCOUNTING_BINARIES = ("mariadbd", "mariadb-install-db", "mariadb", "slurmdbd", "sacctmgr", "sacct", "sshare")


# SchedulerParameters of every cluster here: a batch job is scheduled when submitted. Slurm's default,
# batch_sched_delay=3, lets the scheduling of batch jobs wait up to 3 s (slurm.conf(5): for sites submitting at a very
# high rate); a test's job then started 1.5-3 s after sbatch, 0.3-1 s with 0. Only when a job starts changes.
BATCH_SCHEDULING = "batch_sched_delay=0"


# The states a job ends in (squeue/scontrol JobState): a wait for a job's end stops on any of them.
TERMINAL_JOB_STATES = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "BOOT_FAIL",
    "DEADLINE",
    "PREEMPTED",
}


def run(cmd: list[str], env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def wait_for(what: str, check, timeout: float, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def exited(pid: int) -> bool:
    """True once `pid` is gone or a zombie: a daemon that forked away is no child of ours to wait for."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2] == "Z"


def signal_process(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass  # gone already


def daemon_pid(pid_file: Path, name: str) -> int | None:
    """The pid in `pid_file` if a live process runs the program `name` with it (not a pid reused since), else None.
    The program may be an argument (a Studio client bundle runs its commands through the ELF interpreter)."""
    try:
        pid = int(pid_file.read_text().strip())
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except (OSError, ValueError):
        return None
    return pid if any(Path(a.decode(errors="replace")).name == name for a in argv) and not exited(pid) else None


def start_munged(key: Path, run_dir: Path, state_dir: Path) -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    run_dir.chmod(0o755)  # munged insists that every user can reach its socket
    sock = run_dir / "munge.socket.2"  # munge's default name: configless slurmd asks the default socket first
    result = run(
        in_root(
            "munged",
            f"--key-file={key}",
            f"--socket={sock}",
            f"--pid-file={run_dir / 'munged.pid'}",
            f"--log-file={state_dir / 'munged.log'}",
            f"--seed-file={state_dir / 'munged.seed'}",
        )
    )
    assert result.returncode == 0, result.stderr
    return sock


def quickack_address() -> tuple[str, list[str]]:
    """A loopback address no route names yet, and the `ip route` arguments that make the kernel acknowledge every
    segment to it at once (ip-route(8) `quickack`); the caller adds the route and deletes it at the end.

    slurmdbd's connections (sacctmgr, sacct, slurmctld) carry each message as two writes, a 4-byte length and then
    the body, and Slurm leaves Nagle's algorithm on there: the body waits for the peer's delayed ACK, at least 40 ms on
    Linux. Every message to or from slurmdbd on loopback then costs ~44 ms, and one `sacctmgr -i add` 0.3-0.9 s
    (strace of sacctmgr and slurmdbd: a 4-byte write, 43 ms in poll, then the body). With quick ACKs on the address
    slurmdbd is reached at, the same daemons exchange the same messages without that wait. A /32 of its own under
    127.0.0.0/8 (already local): nothing else on the machine uses it, so nothing else changes."""
    taken = run(["ip", "route", "show", "table", "local"]).stdout
    for _ in range(100):
        address = f"127.{100 + secrets.randbelow(150)}.{secrets.randbelow(256)}.{1 + secrets.randbelow(254)}"
        if f" {address} " not in taken:
            return address, ["local", f"{address}/32", "dev", "lo", "table", "local", "quickack", "1"]
    raise AssertionError("no free loopback address for slurmdbd")


def accounting_conf(*, dbd_host: str, dbd_port: int, munge_socket: Path, priority_weights: dict[str, int]) -> str:
    """Enforced associations, limits and QoS, gres/gpu tracked, multifactor priority with the config's weights."""
    lines = [
        "AccountingStorageType=accounting_storage/slurmdbd",
        f"AccountingStorageHost={dbd_host}",
        f"AccountingStoragePort={dbd_port}",
        # With slurmdbd this names the munge socket that authenticates to it (slurm.conf(5)).
        f"AccountingStoragePass={munge_socket}",
        "AccountingStorageEnforce=associations,limits,qos,safe",
        "AccountingStorageTRES=gres/gpu",
        "JobAcctGatherType=jobacct_gather/linux",
        "PriorityType=priority/multifactor",
        *(f"{k}={v}" for k, v in priority_weights.items()),
    ]
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
    backup_controllers: int = 0
    slurmctld_timeout: int = 30
    scheduler_parameters: str = BATCH_SCHEDULING  # SchedulerParameters in slurm.conf
    proctrack_type: str = "proctrack/linuxproc"
    # (name, address) of every controller, primary first; the host end of each backup's veth, to remove at stop
    controllers: list[tuple[str, str]] = field(default_factory=list)
    _links: list[str] = field(default_factory=list)
    # `ip route` arguments of the routes this cluster added (quickack_address), deleted at stop
    _routes: list[list[str]] = field(default_factory=list)
    # daemons started for this cluster outside `procs`, stopped with it (adopt)
    _adopted: list[int] = field(default_factory=list)

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

        wait_for(what, alive_and, timeout=timeout, interval=0.1)

    def slurmctld_listening(self) -> bool:
        """The (primary) slurmctld accepts connections. Before that a client command waits a second and tries again,
        and configless slurmd, which fetches its configuration from it, tries for ~9 s and then exits."""
        with socket.socket() as s:
            s.settimeout(2)
            return s.connect_ex((self.controllers[0][1], self.slurmctld_port)) == 0

    def node_idle(self) -> bool:
        self._alive("the node to be idle")
        return run(in_root("sinfo", "-h", "-o", "%T"), env=self.env()).stdout.split() == ["idle"]

    def _start_database(self) -> tuple[int, str]:
        """A MariaDB of its own on a loopback port (Debian 12's 10.11, slurm_root.DATABASE_ROOT), and a
        password-protected user for slurmdbd."""
        data, sock = self.ctl / "mysql", self.ctl / "mysqld.sock"
        result = run(
            in_root(
                "mariadb-install-db",
                "--no-defaults",
                f"--datadir={data}",
                "--user=root",
                "--auth-root-authentication-method=socket",
                "--skip-test-db",
                root=DATABASE_ROOT,
            )
        )
        assert result.returncode == 0, result.stdout + result.stderr
        port = free_port()
        self._spawn(
            "mariadbd",
            in_root(
                "mariadbd",
                "--no-defaults",
                f"--datadir={data}",
                f"--socket={sock}",
                f"--port={port}",
                "--bind-address=127.0.0.1",
                "--user=root",
                "--skip-log-bin",
                f"--pid-file={self.ctl / 'mariadbd.pid'}",
                "--innodb-buffer-pool-size=64M",
                f"--log-error={self.ctl / 'mariadbd.log'}",
                root=DATABASE_ROOT,
            ),
        )
        password = secrets.token_hex(16)
        grant = (
            f"CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '{password}'; "
            "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
        )
        self._wait(
            "MariaDB",
            lambda: (
                run(in_root("mariadb", f"--socket={sock}", "-u", "root", "-e", grant, root=DATABASE_ROOT)).returncode
                == 0
            ),
        )
        return port, password

    def _start_slurmdbd(self) -> None:
        """MariaDB, slurmdbd.conf and the accounting.conf slurm.conf includes (sacctmgr reads it), then slurmdbd."""
        db_port, password = self._start_database()
        dbd_port = free_port()
        dbd_host, route = quickack_address()
        result = run(["ip", "route", "add", *route])
        assert result.returncode == 0, result.stderr
        self._routes.append(route)
        dbd_conf = self.etc / "slurmdbd.conf"
        dbd_conf.write_text(
            "\n".join(
                [
                    "AuthType=auth/munge",
                    f"AuthInfo=socket={self.munge_socket}",
                    "DbdHost=localhost",
                    f"DbdAddr={dbd_host}",
                    f"DbdPort={dbd_port}",
                    "SlurmUser=root",
                    "DebugLevel=info",
                    f"LogFile={self.ctl / 'slurmdbd.log'}",
                    f"PidFile={self.ctl / 'slurmdbd.pid'}",
                    "StorageType=accounting_storage/mysql",
                    "StorageHost=127.0.0.1",
                    f"StoragePort={db_port}",
                    "StorageUser=slurm",
                    f"StoragePass={password}",
                    "StorageLoc=slurm_acct_db",
                ]
            )
            + "\n"
        )
        dbd_conf.chmod(0o600)
        (self.etc / "accounting.conf").write_text(
            accounting_conf(
                dbd_host=dbd_host,
                dbd_port=dbd_port,
                munge_socket=self.munge_socket,
                priority_weights=self.priority_weights,
            )
        )
        # slurmdbd reads the slurmdbd.conf beside the slurm.conf that SLURM_CONF names.
        self._spawn("slurmdbd", in_root("env", f"SLURM_CONF={self.conf}", "slurmdbd", "-D"))
        self._wait(
            "slurmdbd", lambda: run(in_root("sacctmgr", "-n", "-P", "show", "cluster"), env=self.env()).returncode == 0
        )

    def _backup_network(self, index: int) -> tuple[str, str, subprocess.Popen]:
        """A network namespace (held by a sleeping process) joined to this one by a veth pair on a free /30 of
        10.254.0.0/16; returns (host address, namespace address, holder)."""
        used = run(["ip", "-4", "-o", "addr", "show"]).stdout
        for _ in range(100):
            base = f"10.254.{secrets.randbelow(256)}.{4 * secrets.randbelow(64)}"
            net = base.rsplit(".", 1)[0]
            last = int(base.rsplit(".", 1)[1])
            host, peer = f"{net}.{last + 1}", f"{net}.{last + 2}"
            if f" {host}/" not in used and f" {peer}/" not in used:
                break
        holder = subprocess.Popen(["unshare", "--net", "sleep", "infinity"], stdin=subprocess.DEVNULL)
        self.procs[f"netns-backup{index}"] = holder
        own = os.readlink("/proc/self/ns/net")
        wait_for(
            "the backup's network namespace",
            lambda: os.readlink(f"/proc/{holder.pid}/ns/net") != own,
            timeout=10,
            interval=0.05,
        )
        link = f"hp{os.getpid() % 100000}b{index}"
        in_ns = ["nsenter", "-t", str(holder.pid), "-n"]
        for argv in (
            ["ip", "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", str(holder.pid)],
            ["ip", "addr", "add", f"{host}/30", "dev", link],
            ["ip", "link", "set", link, "up"],
            [*in_ns, "ip", "addr", "add", f"{peer}/30", "dev", "eth0"],
            [*in_ns, "ip", "link", "set", "eth0", "up"],
            [*in_ns, "ip", "link", "set", "lo", "up"],
        ):
            result = run(argv)
            assert result.returncode == 0, (argv, result.stderr)
            if argv[:3] == ["ip", "link", "add"]:
                self._links.append(link)
        return host, peer, holder

    def _spawn_slurmctld(self, index: int) -> None:
        """Controller `index` (0: the primary) with its own pid and log directory mounted over the shared one."""
        name, _ = self.controllers[index]
        own = self.ctl / f"slurmctld-{index}"
        own.mkdir(exist_ok=True)
        slurmctld = in_root("slurmctld", "-D", "-f", str(self.conf), binds=[(own, str(self.ctl / "slurmctld-run"))])
        if index:  # in the backup's network namespace, under its own host name
            slurmctld = [
                "nsenter",
                "-t",
                str(self.procs[f"netns-backup{index}"].pid),
                "-n",
                "unshare",
                "--uts",
                "sh",
                "-c",
                f'hostname {name} && exec "$@"',
                "slurmctld",
                *slurmctld,
            ]
        self._spawn(f"slurmctld-{index}" if index else "slurmctld", slurmctld)

    def stop_primary(self) -> None:
        """Stops the first controller, as a failed primary; clients and slurmd turn to the backups."""
        p = self.procs.pop("slurmctld")
        p.terminate()
        p.wait(timeout=30)

    def start(self) -> None:
        """munged, (MariaDB and slurmdbd), slurmctld (and its backups) and slurmd; returns when the node is idle."""
        self.state.mkdir(parents=True)
        self.munge_key.write_bytes(os.urandom(1024))
        self.munge_key.chmod(0o400)
        self.munge_socket = start_munged(self.munge_key, self.ctl / "munge", self.ctl)
        self.etc.mkdir(parents=True)
        self.slurmctld_port = free_port()
        address = "127.0.0.1"
        self.controllers = [(socket.gethostname().split(".")[0], address)]
        for i in range(1, self.backup_controllers + 1):
            address, peer, _ = self._backup_network(i)
            self.controllers.append((f"{self.cluster_name}-backup{i}", peer))
        if self.backup_controllers:  # the primary and slurmd are reached from the backups' namespaces too
            self.controllers[0] = (self.controllers[0][0], address)
            (self.ctl / "slurmctld-run").mkdir()
        self.conf.write_text(
            render_slurm_conf(
                cluster_name=self.cluster_name,
                hostname=self.controllers[0][0],
                state_dir=self.state,
                munge_socket=self.munge_socket,
                slurmctld_port=self.slurmctld_port,
                slurmd_port=free_port(),
                cpus=os.cpu_count() or 1,
                real_memory_mb=500,
                partition=self.partition,
                gres=f"gpu:{self.gpu_type}:{self.gpus}" if self.gpus else "",
                address=self.controllers[0][1],
                include_accounting_conf=self.include_accounting_conf,
                backup_controllers=self.controllers[1:],
                slurmctld_timeout=self.slurmctld_timeout,
                scheduler_parameters=self.scheduler_parameters,
                proctrack_type=self.proctrack_type,
                slurmctld_run_dir=self.ctl / "slurmctld-run" if self.backup_controllers else None,
            )
        )
        if self.gpus:
            devices = self.ctl / "dev"
            devices.mkdir()
            for i in range(self.gpus):
                (devices / f"nvidia{i}").touch()
            (self.etc / "gres.conf").write_text(
                f"Name=gpu Type={self.gpu_type} File={devices}/nvidia[0-{self.gpus - 1}]\n"
            )
        if self.proctrack_type == "proctrack/cgroup":
            (self.etc / "cgroup.conf").write_text(CGROUP_CONF)
        (self.etc / "plugstack.conf").write_text("")  # HyperPod's own SPANK entries would be here
        if self.accounting:
            self._start_slurmdbd()
        else:
            (self.etc / "accounting.conf").write_text(ACCOUNTING_CONF)
        if self.backup_controllers:
            # The primary first, as on a cluster: a backup started beside it may create the shared state's
            # clustername file at the moment the primary reads it, and the primary then stops on "CLUSTER NAME
            # MISMATCH" (read "").
            self._spawn_slurmctld(0)
            self._wait(
                "the primary to record the cluster name in the shared state",
                lambda: any(f.read_text().strip() for f in self.state.rglob("clustername")),
            )
            for i in range(1, len(self.controllers)):
                self._spawn_slurmctld(i)
        else:
            self._spawn("slurmctld", in_root("slurmctld", "-D", "-f", str(self.conf)))
        self._wait("slurmctld to listen", self.slurmctld_listening)
        servers = ",".join(f"{addr}:{self.slurmctld_port}" for _, addr in self.controllers)
        self._spawn(
            "slurmd",
            in_root("slurmd", "-D", "--conf-server", servers, binds=[(self.munge_socket.parent, "/run/munge")]),
        )
        self.wait_node_idle()

    def restart_slurmctld(self) -> None:
        """Restarts slurmctld; returns once it answers. The node is idle again once slurmd has answered the new
        slurmctld's registration request, which it sends ~3 s after its start: `wait_node_idle()` before any job."""
        p = self.procs.pop("slurmctld")
        p.terminate()
        p.wait(timeout=30)
        self._spawn("slurmctld", in_root("slurmctld", "-D", "-f", str(self.conf)))
        self._wait("slurmctld to listen after the restart", self.slurmctld_listening)

    def wait_node_idle(self) -> None:
        self._wait("the node to be idle", self.node_idle)

    def spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        """Another process stopped with the cluster (moto server, a Prometheus); output in ctl/<name>.stdout."""
        self._spawn(name, argv)
        return self.procs[name]

    def adopt(self, pid_file: Path, name: str) -> None:
        """The daemon `name` whose pid `pid_file` holds (one a test started for this cluster, e.g. a Studio sandbox's
        munged) stops with the cluster, at the same time as its own daemons."""
        pid = daemon_pid(pid_file, name)
        if pid is not None:
            self._adopted.append(pid)

    def stop(self) -> None:
        """Stops every process at once: slurmctld and munged each take about a second to exit after SIGTERM."""
        munged = daemon_pid(self.munge_socket.parent / "munged.pid", "munged") if self.munge_socket else None
        daemons = [pid for pid in (munged, *self._adopted) if pid is not None]
        for p in reversed(list(self.procs.values())):
            p.terminate()
        for pid in daemons:
            signal_process(pid, signal.SIGTERM)
        for p in self.procs.values():
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for pid in daemons:
            try:
                wait_for(f"process {pid} to exit", lambda pid=pid: exited(pid), timeout=15, interval=0.05)
            except AssertionError:
                signal_process(pid, signal.SIGKILL)
        for link in self._links:  # gone with its namespace already, unless a process there outlived the stop
            run(["ip", "link", "del", link])
        for route in self._routes:
            run(["ip", "route", "del", *route])
        if self.proctrack_type == "proctrack/cgroup":
            self._remove_empty_cgroups()

    def _remove_empty_cgroups(self) -> None:
        """The cgroups slurmd left on the machine, deepest first, each only if empty (rmdir refuses a cgroup with a
        process in it): cgroup/v1's per-controller /slurm_<node> trees (CgroupPrepend's default with multiple slurmd,
        as Debian builds it), cgroup/v2's <node>_slurmstepd.scope or slurmstepd.scope."""
        node = self.controllers[0][0] if self.controllers else ""
        roots = [
            *Path("/sys/fs/cgroup").glob(f"*/slurm_{node}"),
            *Path("/sys/fs/cgroup").glob(f"*/{node}_slurmstepd.scope"),
            *Path("/sys/fs/cgroup").glob("*/slurmstepd.scope"),
        ]
        for root in roots:
            for directory in sorted((d for d in root.rglob("*") if d.is_dir()), key=lambda d: -len(d.parts)):
                try:
                    directory.rmdir()
                except OSError:
                    pass
            try:
                root.rmdir()
            except OSError:
                pass
