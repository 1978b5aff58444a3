"""`make bench` judges its targets on CPU time (wall time on a shared machine measures the neighbours)."""

import json
import os
import subprocess
import sys

from tools import bench

TEN, THOUSAND, FIVE_THOUSAND = ".bench/users-10.yaml", ".bench/users-1000.yaml", ".bench/users-5000.yaml"
MANY = {1000: THOUSAND, 5000: FIVE_THOUSAND}


def run(cpu: float, wall: float) -> list[tuple[float, float]]:
    return [(wall, cpu)]


def line_of(lines: list[str], name: str) -> str:
    (line,) = [line for line in lines if line.lstrip().startswith(name)]
    return line


def test_the_targets_are_those_of_issue_24():
    assert (bench.TARGET_RATIO, bench.EKS_TARGET_RATIO, bench.USERS_TARGETS) == (2.0, 2.15, {1000: 1.5, 5000: 3.0})


def test_targets_are_judged_on_cpu_not_wall():
    lines = bench.report(
        {
            bench.TRIVIAL: run(cpu=6.0, wall=5.0),
            "config/default.yaml": run(cpu=11.9, wall=15.0),  # CPU 1.98x (met), wall 3.0x
            ".bench/eks.yaml": run(cpu=13.0, wall=6.0),  # CPU 2.17x (missed), wall 1.2x
            TEN: run(cpu=9.0, wall=20.0),
            THOUSAND: run(cpu=14.0, wall=20.0),  # CPU 1.56x (missed), wall 1.0x
            FIVE_THOUSAND: run(cpu=27.0, wall=90.0),  # CPU 3.00x (met), wall 4.5x
        },
        TEN,
        MANY,
    )
    assert "CPU  11.90 s (1.98x)" in line_of(lines, "config/default.yaml")
    assert "wall  15.00 s (3.00x)" in line_of(lines, "config/default.yaml")
    assert line_of(lines, "config/default.yaml").endswith("(target <= 2.00x: met)")
    assert line_of(lines, ".bench/eks.yaml").endswith("(target <= 2.15x: MISSED)")
    assert line_of(lines, "1,000 users").endswith("(target <= 1.50x: MISSED)")
    assert "CPU 3.00x   wall 4.50x" in line_of(lines, "5,000 users")
    assert line_of(lines, "5,000 users").endswith("(target <= 3.00x: met)")
    assert "target" not in line_of(lines, TEN) and "target" not in line_of(lines, bench.TRIVIAL)
    assert "target" not in line_of(lines, FIVE_THOUSAND)
    over = bench.report(
        {
            bench.TRIVIAL: run(cpu=6.0, wall=5.0),
            "config/default.yaml": run(cpu=12.1, wall=5.0),
            TEN: run(cpu=9.0, wall=9.0),
            FIVE_THOUSAND: run(cpu=27.1, wall=9.0),
        },
        TEN,
        MANY,
    )
    assert line_of(over, "config/default.yaml").endswith("(target <= 2.00x: MISSED)")
    assert line_of(over, "5,000 users").endswith("(target <= 3.00x: MISSED)")
    assert not any(line.lstrip().startswith("1,000 users") for line in over)


def test_medians_of_alternating_runs():
    lines = bench.report(
        {
            bench.TRIVIAL: [(5.0, 6.0), (50.0, 6.2), (5.2, 9.0)],
            "config/default.yaml": [(9.0, 9.3), (9.1, 30.0), (90.0, 9.2)],
        },
        TEN,
        MANY,
    )
    assert "CPU   6.20 s" in line_of(lines, bench.TRIVIAL) and "wall   5.20 s" in line_of(lines, bench.TRIVIAL)
    assert "CPU   9.30 s (1.50x)" in line_of(lines, "config/default.yaml")
    assert line_of(lines, "config/default.yaml").endswith("met)")
    assert not any(line.lstrip().startswith(("1,000 users", "5,000 users")) for line in lines)


def test_validation_split_over_the_trivial_app():
    runs = {
        bench.TRIVIAL: run(cpu=6.0, wall=4.0),
        bench.FLOOR: run(cpu=7.5, wall=5.0),
        "config/default.yaml": run(cpu=11.0, wall=8.0),
        ".bench/eks.yaml": run(cpu=13.0, wall=9.0),
    }
    unvalidated = {
        bench.TRIVIAL: run(cpu=2.0, wall=1.5),
        bench.FLOOR: run(cpu=2.5, wall=2.0),
        "config/default.yaml": run(cpu=4.5, wall=3.0),
        ".bench/eks.yaml": run(cpu=5.5, wall=4.0),
    }
    lines = bench.validation_report(runs, unvalidated)
    assert line_of(lines, bench.TRIVIAL).endswith("validation  4.00 s, the rest  2.00 s")
    assert line_of(lines, bench.FLOOR).endswith(
        "validation  5.00 s, the rest  2.50 s  (+1.00 s and +0.50 s over the trivial app's)"
    )
    assert line_of(lines, "config/default.yaml").endswith(
        "validation  6.50 s, the rest  4.50 s  (+2.50 s and +2.50 s "
        "over the trivial app's; target allows +6.00 s in all)"
    )
    assert line_of(lines, ".bench/eks.yaml").endswith(
        "(+3.50 s and +3.50 s over the trivial app's; target allows +6.90 s in all)"
    )
    faster = bench.validation_report(
        {**runs, bench.FLOOR: run(cpu=5.5, wall=4.0)}, {**unvalidated, bench.FLOOR: run(cpu=2.0, wall=1.5)}
    )
    assert line_of(faster, bench.FLOOR).endswith("(-0.50 s and +0.00 s over the trivial app's)")


def test_the_floor_has_no_target():
    lines = bench.report({bench.TRIVIAL: run(cpu=6.0, wall=4.0), bench.FLOOR: run(cpu=9.5, wall=5.0)}, TEN, MANY)
    assert "target" not in line_of(lines, bench.FLOOR)


def test_the_floor_is_the_default_configs_network_stack(tmp_path):
    context = json.loads((bench.ROOT / "cdk.json").read_text())["context"]
    subprocess.run(
        [sys.executable, "tools/floor_app.py"],
        cwd=bench.ROOT,
        check=True,
        timeout=300,
        env={
            **os.environ,
            "CDK_CONTEXT_JSON": json.dumps(context),
            "CDK_OUTDIR": str(tmp_path),
            "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20",
            # Which stack the floor builds is the question; aws-cdk-lib's validation of the default config's network
            # stack is proven where the `synth` fixture builds it, and its engine costs this fresh process ~5 s.
            "CDK_VALIDATION": "false",
        },
    )
    assert sorted(p.name for p in tmp_path.glob("*.template.json")) == ["ml-cluster-network.template.json"]
    resources = json.loads((tmp_path / "ml-cluster-network.template.json").read_text())["Resources"].values()
    assert [r["Properties"]["CidrBlock"] for r in resources if r["Type"] == "AWS::EC2::VPC"] == ["10.0.0.0/16"]
    assert sum(r["Type"] == "AWS::EC2::FlowLog" for r in resources) == 1
