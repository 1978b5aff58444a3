"""The instance types HyperPod clusters accept, from botocore's SageMaker service model (shape ClusterInstanceType,
the enum of CreateCluster's InstanceGroups[].InstanceType), written to config/facts/cluster_instance_types.json.

    python tools/cluster_instance_types.py [--check]

The config model checks every instance group's type against this list (platform_config/facts.py) and suggests the
closest ones for a typo; `config/schema.json` carries it as an enum so editors flag a typo as it is typed. --check
exits 1 when the committed file differs from the installed botocore's model (tests/test_instance_type_facts.py runs
it), so a botocore upgrade that adds a type shows up as a test failure until this is rerun. Nothing here calls AWS.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import botocore
import botocore.session

from committed_file import write_or_check

ROOT = Path(__file__).resolve().parent.parent
FACTS = ROOT / "config" / "facts" / "cluster_instance_types.json"
SHAPE = "ClusterInstanceType"


def derive() -> str:
    model = botocore.session.get_session().get_service_model("sagemaker")
    types = sorted(model.shape_for(SHAPE).enum)
    facts = {
        "source": f"botocore {botocore.__version__}, service model sagemaker ({model.api_version}), shape {SHAPE}",
        "instance_types": types,
    }
    return json.dumps(facts, indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare with the committed file instead of writing it")
    args = parser.parse_args(argv)
    return write_or_check(FACTS, derive(), check=args.check, source=f"botocore {botocore.__version__}'s {SHAPE}")


if __name__ == "__main__":
    sys.exit(main())
