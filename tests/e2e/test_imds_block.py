"""End to end: lifecycle/hyperpod/block_imds.sh with the real iptables, in a network namespace of its own, against the
two ways HyperPod's credential proxy may serve the execution role (lifecycle/node_contract.json, role-proxy-imds,
unverified): answering on 169.254.169.254 itself, or reached through a nat OUTPUT DNAT of that address to a local port.

Each scenario runs in `unshare --net --mount`: the node's namespace reaches 169.254.169.254 through a veth into a
second namespace, where a small HTTP server stands for the metadata service (or, for the proxy, one on a local port of
the node's namespace; the credentials are a fixed test string), then the project's script as the boot unit runs it (BLOCK_IMDS_RULES_ONLY=1, its connection test as `nobody` on). Before the block, `nobody` reads the
credentials (the attack is real); after it, `nobody` is refused and root still reads them. The machine's own network
and netfilter rules are untouched.

Needs root, iptables (Debian package iptables), unshare and setpriv.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "lifecycle" / "hyperpod" / "block_imds.sh"
CREDENTIALS = "AKIAEXAMPLEPROXYCREDS"

missing = [
    b
    for b in ("iptables", "unshare", "setpriv", "ip", "timeout")
    if shutil.which(b) is None and not Path("/usr/sbin", b).exists()
] + ([] if Path("/usr/bin/python3").exists() else ["/usr/bin/python3"])
pytestmark = pytest.mark.skipif(
    bool(missing) or os.geteuid() != 0,
    reason=f"needs root and {', '.join(missing) or 'nothing else'}: apt-get install iptables",
)

SCENARIO = r"""
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"
# The node's namespace reaches 169.254.169.254 through a veth into a second namespace, as an instance reaches the
# metadata service: from its own address, not from a local one (a local 169.254.169.254 would swallow REJECT's answer).
mkdir -p /run/netns
mount -t tmpfs tmpfs /run/netns
ip netns add metadata
ip link add node0 type veth peer name imds0
ip link set imds0 netns metadata
ip link set lo up
ip addr add 10.200.0.1/24 dev node0
ip link set node0 up
ip route add 169.254.169.254/32 via 10.200.0.2
ip netns exec metadata sh -c 'ip link set lo up; ip addr add 10.200.0.2/24 dev imds0; ip link set imds0 up;
  ip addr add 169.254.169.254/32 dev lo'
www="$WORK/www/latest/meta-data/iam/security-credentials"
mkdir -p "$www"
echo "$CREDENTIALS" >"$www/node-role"
chmod -R a+rX "$WORK"
if [ "$MODE" = direct ]; then
  ip netns exec metadata /usr/bin/python3 -m http.server --bind 169.254.169.254 80 --directory "$WORK/www" \
    >"$WORK/server.log" 2>&1 &
else
  # A credential proxy on a local port, reached through a DNAT of the metadata address.
  /usr/bin/python3 -m http.server --bind 127.0.0.1 8181 --directory "$WORK/www" >"$WORK/server.log" 2>&1 &
  iptables -w -t nat -A OUTPUT -d 169.254.169.254 -p tcp --dport 80 -j DNAT --to-destination 127.0.0.1:8181
fi
server=$!
trap 'kill $server' EXIT
fetch() {
  timeout 10 setpriv --reuid="$1" --regid="$1" --clear-groups /usr/bin/python3 -c '
import sys, urllib.request
try:
    print(urllib.request.urlopen(f"http://{sys.argv[1]}/latest/meta-data/iam/security-credentials/node-role",
                                 timeout=3).read().decode().strip())
except Exception as e:
    print(f"error: {e}")
' "${2:-169.254.169.254}" 2>&1
}
for _ in $(seq 100); do [[ "$(fetch 0)" == "$CREDENTIALS" ]] && break; sleep 0.1; done
echo "before root: $(fetch 0)"
echo "before nobody: $(fetch 65534)"
rc=0
env BLOCK_IMDS_RULES_ONLY=1 IMDS_PROBE=1 LOG_DIR="$WORK/log" STATE_DIR="$WORK/state" PLATFORM_DIR="$WORK/platform" \
  SYSTEMD_DIR="$WORK/systemd" bash "$SCRIPT" >"$WORK/block.log" 2>&1 || rc=$?
echo "block rc: $rc"
echo "after root: $(fetch 0)"
echo "after nobody: $(fetch 65534)"
# The proxy's own port, not through the metadata address (only the DNAT scenario has one).
echo "after nobody direct: $(fetch 65534 127.0.0.1:8181)"
echo "after root direct: $(fetch 0 127.0.0.1:8181)"
"""


def run_scenario(mode: str) -> tuple[dict[str, str], str]:
    work = Path(tempfile.mkdtemp(prefix="imds-block-"))
    try:
        work.chmod(0o755)
        env = {**os.environ, "WORK": str(work), "MODE": mode, "CREDENTIALS": CREDENTIALS, "SCRIPT": str(SCRIPT)}
        result = subprocess.run(
            ["unshare", "--net", "--mount", "--propagation", "private", "bash", "-c", SCENARIO],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
        lines = dict(line.split(": ", 1) for line in result.stdout.splitlines() if ": " in line)
        log = (work / "block.log").read_text() if (work / "block.log").exists() else ""
        assert result.returncode == 0, result.stdout + result.stderr + log
        return lines, log
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_direct_metadata_service_is_root_only():
    seen, log = run_scenario("direct")
    assert (seen["before root"], seen["before nobody"]) == (CREDENTIALS, CREDENTIALS)  # the attack, before
    assert seen["block rc"] == "0", log
    assert seen["after root"] == CREDENTIALS
    assert seen["after nobody"].startswith("error:") and "refused" in seen["after nobody"], seen
    assert "as nobody, 169.254.169.254:80 refuse the connection: the block holds" in log


def test_metadata_proxy_behind_dnat_is_root_only():
    seen, log = run_scenario("dnat")
    assert (seen["before root"], seen["before nobody"]) == (CREDENTIALS, CREDENTIALS)
    assert seen["block rc"] == "0", log
    assert seen["after root"] == CREDENTIALS
    assert seen["after nobody"].startswith("error:") and "refused" in seen["after nobody"], seen
    assert (
        "this node redirects metadata traffic (-A OUTPUT -d 169.254.169.254/32 -p tcp -m tcp --dport 80 -j DNAT "
        "--to-destination 127.0.0.1:8181)" in log
    )
    # A user who connects to the proxy's own port, not through the metadata address, is refused too; root is not.
    assert seen["after nobody direct"].startswith("error:") and "refused" in seen["after nobody direct"], seen
    assert seen["after root direct"] == CREDENTIALS
    # and only with both paths tested does the script say the block holds
    assert "as nobody, 169.254.169.254:80 127.0.0.1:8181 refuse the connection: the block holds" in log
