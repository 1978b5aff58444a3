"""lifecycle/node_contract.json, the node contract: its shape, its sources, that every test it names exists, that the
scripts' contract warnings name its facts, that CONTRACT.md is rendered from it, and that the AMI model
(tests/lifecycle/ami_model.py) lays out every fact and every variant."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONTRACT = json.loads((ROOT / "lifecycle" / "node_contract.json").read_text())
FACTS = {f["id"]: f for f in CONTRACT["facts"]}
SCRIPTS = ROOT / "lifecycle" / "hyperpod"

_spec = importlib.util.spec_from_file_location("ami_model", ROOT / "tests" / "lifecycle" / "ami_model.py")
ami_model = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ami_model)


def test_every_fact_is_complete_and_its_sources_are_named():
    assert len(FACTS) == len(CONTRACT["facts"]), "fact ids must be unique"
    for fact in CONTRACT["facts"]:
        assert set(fact) >= {
            "id",
            "what",
            "node_types",
            "status",
            "sources",
            "used_by",
            "when_absent",
            "behaviour",
            "tests",
            "fixture",
        }, fact["id"]
        assert fact["status"] in CONTRACT["statuses"], fact["id"]
        assert fact["when_absent"] in CONTRACT["behaviours"], fact["id"]
        assert set(fact["node_types"]) <= {"controller", "login", "compute"} and fact["node_types"], fact["id"]
        assert fact["sources"] and all(s["ref"] in CONTRACT["sources"] and s["says"] for s in fact["sources"]), fact[
            "id"
        ]
        assert fact["behaviour"].strip(), fact["id"]


def test_an_unverified_fact_is_never_relied_on_and_has_a_test_per_variant():
    for fact in (f for f in CONTRACT["facts"] if f["status"] == "unverified"):
        assert fact["when_absent"] != "rely", f"{fact['id']}: an unverified fact is detected, not relied on"
        assert len(fact["tests"]) >= 2 or fact["when_absent"] == "fail", (
            f"{fact['id']}: one test with the fact present and one without"
        )


def test_every_named_test_exists():
    for fact in CONTRACT["facts"]:
        for ref in fact["tests"]:
            path, _, name = ref.partition("::")
            text = (ROOT / path).read_text()
            if not name:
                continue
            pattern = f'@test "{name}"' if path.endswith(".bats") else f"def {name}("
            assert pattern in text, f"{fact['id']}: {ref} is not in {path}"


def test_every_contract_warning_in_the_scripts_names_a_fact_and_every_adapting_fact_is_handled():
    scripts = {
        p.relative_to(SCRIPTS).as_posix(): p.read_text()
        for p in SCRIPTS.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }  # as shipped: the asset leaves bytecode out
    named = set()
    for text in scripts.values():
        named |= set(re.findall(r"contract_warn ([a-z0-9-]+)", text))
    assert named, "no contract_warn call found"
    assert named <= set(FACTS), f"contract warnings for facts the contract lacks: {sorted(named - set(FACTS))}"
    for fact in CONTRACT["facts"]:
        for script in fact["used_by"]:
            assert script in scripts, f"{fact['id']}: used_by {script} is not a file in lifecycle/hyperpod"
        if fact["when_absent"] == "adapt" and fact["used_by"]:
            assert any(fact["id"] in scripts[s] for s in fact["used_by"]), (
                f"{fact['id']}: no script it names (used_by) mentions it"
            )


def test_contract_md_is_rendered_from_the_json():
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "render_node_contract.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    text = (ROOT / "lifecycle" / "CONTRACT.md").read_text()
    for fact in FACTS:
        assert f"#### `{fact}`" in text


def layout(tmp_path: Path, node_type: str, absent: set[str]) -> dict[str, str]:
    root, fake = tmp_path / f"{node_type}-{'-'.join(sorted(absent)) or 'all'}", tmp_path / "fake"
    fake.mkdir(exist_ok=True)
    (fake / "mounts").write_text("")
    for f in (fake / "dpkg").glob("*") if (fake / "dpkg").exists() else []:
        f.unlink()
    for f in fake.iterdir():  # the stubs' state of an earlier layout (packages, services)
        if f.is_file() and f.name != "mounts":
            f.unlink()
    ami_model.lay_out(CONTRACT, ami_model.Layout(root, {}, fake), node_type, absent)
    # Paths relative to the layout's root, so two layouts compare by what they hold, not where they are.
    files = {
        str(p.relative_to(root)): (
            p.read_text()
            if p.is_file() and not p.is_symlink()
            else str(p.readlink()).replace(str(root), "")
            if p.is_symlink()
            else "dir"
        )
        for p in root.rglob("*")
    }
    files.update(
        {f"dpkg:{p.name}": p.read_text() for p in (fake / "dpkg").glob("*")} if (fake / "dpkg").exists() else {}
    )
    files.update(
        {
            f"mount:{m.replace(str(root), '')}": ""
            for m in (fake / "mounts").read_text().split()
            if m.startswith(str(root))
        }
    )
    files.update({f"state:{p.name}": p.read_text() for p in fake.iterdir() if p.is_file() and p.name != "mounts"})
    return files


@pytest.mark.parametrize("node_type", ["controller", "login", "compute"])
def test_the_ami_model_lays_out_each_fact_and_leaves_out_each_absent_one(tmp_path, node_type):
    full = layout(tmp_path, node_type, set())
    if node_type == "controller":
        assert "include accounting.conf" in full["opt/slurm/etc/slurm.conf"].splitlines()
        rc = json.loads(full["opt/ml/config/resource_config.json"])
        assert rc["SlurmConfig"] == {"PrimaryControllerIp": "10.1.0.12", "SecondaryControllerIps": []}
    else:
        assert "opt/slurm/etc/slurm.conf" not in full  # configless: slurmd's ExecStartPre deletes it
        assert "enable_configless" in full["var/spool/slurmd/conf-cache/slurm.conf"]
    assert full["opt/slurm/etc/plugstack.conf.d/pyxis.conf"].endswith("usr/local/share/pyxis/pyxis.conf")
    for fact in CONTRACT["facts"]:
        if node_type not in fact["node_types"] or not fact["fixture"]:
            continue
        assert layout(tmp_path, node_type, {fact["id"]}) != full, f"{fact['id']}: leaving it out changes nothing"


def test_the_ami_model_refuses_an_unknown_fact(tmp_path):
    with pytest.raises(ami_model.ModelError, match="no-such-fact"):
        ami_model.lay_out(CONTRACT, ami_model.Layout(tmp_path, {}, None), "controller", {"no-such-fact"})


def test_the_ami_model_cleans_and_lays_out_again_in_one_call(tmp_path):
    """`--clean --node-type` (test_helper.bash's ami_node, one Python start): the earlier layout goes, the new one comes."""
    fake, manifest = tmp_path / "fake", tmp_path / "ami.manifest"
    fake.mkdir()
    (fake / "mounts").write_text("")
    args = ["--root", str(tmp_path / "node"), "--fake-root", str(fake), "--manifest", str(manifest)]
    assert ami_model.main(["--node-type", "controller", *args]) == 0
    assert (tmp_path / "node" / "opt" / "slurm" / "etc" / "slurm.conf").is_file()
    assert ami_model.main(["--clean", "--node-type", "compute", *args]) == 0
    assert not (tmp_path / "node" / "opt" / "slurm" / "etc" / "slurm.conf").exists()  # the controller's is gone
    assert (tmp_path / "node" / "var" / "spool" / "slurmd" / "conf-cache" / "slurm.conf").is_file()
    assert ami_model.main(["--clean", "--manifest", str(manifest)]) == 0
    assert not (tmp_path / "node" / "var" / "spool" / "slurmd" / "conf-cache" / "slurm.conf").exists()


def test_a_documented_fact_cites_only_sources_with_a_url_or_a_revision():
    """'documented' is a claim about AWS's documentation: each of its sources has an address or a pinned commit."""
    pinned = re.compile(r"https://|@[0-9a-f]{7,40}\b")
    for fact in (f for f in CONTRACT["facts"] if f["status"] == "documented"):
        for source in fact["sources"]:
            assert pinned.search(CONTRACT["sources"][source["ref"]]), (
                f"{fact['id']}: documented, but its source {source['ref']} has no URL or revision"
            )
    for fact in (f for f in CONTRACT["facts"] if f["status"] == "observed"):
        assert any(pinned.search(CONTRACT["sources"][s["ref"]]) for s in fact["sources"]), fact["id"]


def test_slurm_facts_come_from_the_slurm_release_hyperpod_runs():
    """HyperPod's AMI runs Slurm 24.11: the Slurm man pages the contract cites are 24.11's."""
    slurm_sources = {k: v for k, v in CONTRACT["sources"].items() if "slurm.schedmd.com" in v or "Slurm 2" in v}
    assert slurm_sources and all("24.11" in v for v in slurm_sources.values()), slurm_sources


# A command that needs slurmctld to answer, where a command starts (`--version` is local, so not matched).
SLURMCTLD_CALL = r"(?:^|\$\(|<\(|\|\s|&&\s|\bif\s|!\s)\s*(?:[A-Z_]+=\"[^\"]*\"\s+)*(?:{})"
SLURMCTLD_COMMANDS = [r"scontrol (?:show|reconfigure|update|token)\b", r"sinfo\s+-[^-]", r"squeue\s+-[^-]"]


def slurmctld_calls(text: str) -> list[int]:
    """Offsets of the calls to slurmctld in a script; a call inside a function that does not wait itself counts where
    the function is called (configure_slurm_auth.sh's jwt_accepted)."""
    commands = list(SLURMCTLD_COMMANDS)
    # comments and the bodies moved to their call sites blanked, every offset kept
    code = "\n".join(" " * len(line) if line.lstrip().startswith("#") else line for line in text.split("\n"))
    for name, body in re.findall(r"^([a-z_]+)\(\) \{\n(.*?)^\}", code, re.M | re.S):
        if "wait_for_slurmctld" not in body and re.search(SLURMCTLD_CALL.format("|".join(commands)), body, re.M):
            commands.append(rf"{name}\b(?!\(\))")
            code = code.replace(body, re.sub(r"[^\n]", " ", body))
    return [m.start() for m in re.finditer(SLURMCTLD_CALL.format("|".join(commands)), code, re.M)]


def test_every_script_that_talks_to_slurmctld_waits_for_it_first():
    """slurmctld-starts-in-parallel: a node script waits for slurmctld before any call to it, and the scripts that
    talk to it are the fact's used_by (lib/common.sh holds the wait)."""
    talking = set()
    for path in sorted(SCRIPTS.glob("*.sh")):
        text = path.read_text()
        for offset in slurmctld_calls(text):
            talking.add(path.name)
            assert "wait_for_slurmctld " in text[:offset], (
                f"{path.name}: line {text[:offset].count(chr(10)) + 1} talks to slurmctld without waiting for it first"
            )
    assert talking == set(FACTS["slurmctld-starts-in-parallel"]["used_by"]) - {"lib/common.sh"}, talking
    assert re.search(r"^wait_for_slurmctld\(\) \{", (SCRIPTS / "lib" / "common.sh").read_text(), re.M)


def test_every_unit_the_scripts_order_against_is_in_the_contract():
    """systemd-unit-names: a unit of HyperPod's (or the AMI's) that a platform unit is ordered against is named there."""
    own = re.compile(r"^(hyperpod-.*|.*\.target|prometheus-node-exporter\.service)$")  # the platform installs these
    ordered = set()
    for path in SCRIPTS.rglob("*.sh"):
        for line in re.findall(r"^(?:After|Before|Wants|Requires|BindsTo)=(.*)$", path.read_text(), re.M):
            line = re.sub(r"\$\{[^}]*\}", "", line)  # a unit the script names at run time (FSx's mount unit)
            ordered |= {u for u in line.split() if not own.match(u)}
    assert ordered, "no ordering found: the pattern no longer matches the scripts"
    assert ordered <= set(FACTS["systemd-unit-names"]["units"]), ordered - set(FACTS["systemd-unit-names"]["units"])


def test_block_imds_asks_about_every_hyperpod_agent_the_contract_names():
    """hyperpod-agents-run-as-root: the unit pattern block_imds.sh lists covers every Slurm-node agent of the fact."""
    text = (SCRIPTS / "block_imds.sh").read_text()
    patterns = re.findall(r"list-units [^\n]*'([a-z*-]+)'", text)
    assert patterns == ["sagemaker-*"], patterns
    for unit in FACTS["hyperpod-agents-run-as-root"]["units"]:
        assert re.fullmatch(patterns[0].replace("*", ".*") + r"(\.service)?", unit), unit
    assert "hyperpod-*" not in FACTS["hyperpod-agents-run-as-root"]["behaviour"]


def test_the_scripts_that_read_hostname_addresses_are_the_contract_s():
    users = {p.name for p in SCRIPTS.glob("*.sh") if "hostname -I" in p.read_text()}
    assert users == set(FACTS["hostname-addresses"]["used_by"])


def test_the_ami_model_puts_login_nodes_in_the_default_partition_and_the_gpu_job_mapping_directory(tmp_path):
    controller = layout(tmp_path, "controller", set())
    assert (
        "PartitionName=dev Nodes=ALL Default=YES MaxTime=INFINITE State=UP"
        in controller["opt/slurm/etc/slurm.conf"].splitlines()
    )
    compute = layout(tmp_path, "compute", set())
    assert compute["run/slurm/dcgm-job-mapping"] == "dir"
