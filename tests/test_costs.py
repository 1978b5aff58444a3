"""The cost estimate `make synth` prints (cli/costs.py) and its price table (cli/prices.py): the table is derived
from the AWS Price List Query API's GetProducts answers, fetched by `make preflight`.

moto 5.2 has no Price List API (no moto/pricing): the GetProducts answers come from botocore's Stubber on a real
`pricing` client, which checks every request's parameters and every answer against botocore's model of the API
(pricing 2017-10-15). The PriceList items are the API's documented JSON (product, attributes, sku, terms.OnDemand
priceDimensions); their prices are this test's inputs, not AWS's."""

from __future__ import annotations

import datetime
import json

import boto3
import pytest
from botocore.stub import Stubber

from support.cli_main import run_main
from support.variants import VARIANT_FILES
from support.price_list_answers import REGION, answers, item, stubbed_pricing
from cli import costs, prices
from cli.preflight import OK, UNKNOWN, WARNING, refresh_prices

TODAY = datetime.date(2026, 11, 29)


def test_the_table_is_derived_from_the_price_list_answers_every_page_read():
    client, stubber = stubbed_pricing(answers({"ml.m5.xlarge": "0.23", "ml.g5.8xlarge": "3.06"}))
    tables, left_out = prices.fetch(client, [REGION], today=TODAY)
    stubber.assert_no_pending_responses()  # every query asked, the second page followed through NextToken
    table = tables[REGION]
    assert table["fetched"] == "2026-11-29" and table["source"] == prices.API_SOURCE
    items = {k: v["usd"] for k, v in table["items"].items()}
    assert items == {
        "hyperpod_instance_hour:ml.m5.xlarge": 0.23,
        "hyperpod_instance_hour:ml.g5.8xlarge": 3.06,
        "nat_gateway_hour": 0.045,
        "network_load_balancer_hour": 0.0225,
        "interface_endpoint_hour": 0.01,
        "kms_key_month": 1.0,
        "cloudwatch_alarm_month": 0.1,
        "eks_cluster_hour": 0.1,
        "fsx_lustre_ssd_gb_month:125": 0.145,
        "fsx_lustre_ssd_gb_month:250": 0.21,
        "fsx_lustre_ssd_gb_month:500": 0.29,
        "fsx_lustre_ssd_gb_month:1000": 0.6,
    }
    assert table["items"]["hyperpod_instance_hour:ml.g5.8xlarge"]["usagetype"] == "USW2-Cluster:ml.g5.8xlarge"
    assert left_out == []


def test_two_different_prices_for_one_item_leave_it_off_the_table():
    query = next(q for q in prices.queries() if q.key == "nat_gateway_hour")
    found, dropped = prices.entries(
        query,
        [
            item("AmazonEC2", "USW2-NatGateway-Hours", "Hrs", "0.045"),
            item("AmazonEC2", "NatGateway-Hours", "Hrs", "0.048"),
        ],
    )
    assert found == {}
    assert dropped == ["nat_gateway_hour: 2 different prices (NatGateway-Hours=0.048, USW2-NatGateway-Hours=0.045)"]


def test_only_hyperpods_cluster_line_prices_an_instance():
    query = prices.queries()[0]
    found, _ = prices.entries(
        query,
        [
            item("AmazonSageMaker", "USW2-Train:ml.m5.xlarge", "Hrs", "0.5"),
            item("AmazonSageMaker", "USW2-Studio:ml.m5.xlarge", "Hrs", "0.6"),
            item("AmazonSageMaker", "USW2-ReservedCluster:ml.m5.xlarge", "Hrs", "0.7"),
            item("AmazonSageMaker", "Cluster:ml.m5.xlarge", "Hrs", "0.23"),
        ],
    )
    assert {k: v["usd"] for k, v in found.items()} == {"hyperpod_instance_hour:ml.m5.xlarge": 0.23}


def test_eu_west_1s_billing_code_has_no_digit_and_still_prices():
    # eu-west-1's usage types carry "EU-", not a letters-and-digit code like USW2- (AWS Region billing codes,
    # https://docs.aws.amazon.com/global-infrastructure/latest/regions/aws-region-billing-codes.html); eu-west-1 is a
    # shipped config's region, so a prefix rule that wants a digit would leave its whole table empty.
    by_key = {q.key: q for q in prices.queries()}
    found, _ = prices.entries(
        by_key["hyperpod_instance_hour:{0}"],
        [
            item("AmazonSageMaker", "EU-Cluster:ml.p5.48xlarge", "Hrs", "70.0"),
            item("AmazonSageMaker", "EU-ReservedCluster:ml.m5.xlarge", "Hrs", "0.7"),
        ],
    )
    assert {k: v["usd"] for k, v in found.items()} == {"hyperpod_instance_hour:ml.p5.48xlarge": 70.0}
    found, _ = prices.entries(
        by_key["nat_gateway_hour"],
        [
            item("AmazonEC2", "EU-NatGateway-Hours", "Hrs", "0.048"),
            item("AmazonEC2", "EU-RegionalNatGateway-Hours", "Hrs", "0.05"),
        ],
    )
    assert {k: v["usd"] for k, v in found.items()} == {"nat_gateway_hour": 0.048}


def test_a_kms_usage_type_carries_the_region_name():
    # KMS's usage types start with the Region's name, not its billing code (us-west-2-KMS-Keys, as KMS lines in
    # published bills and price rows read); the request line beside it is not the key's monthly price.
    query = next(q for q in prices.queries() if q.key == "kms_key_month")
    found, _ = prices.entries(
        query,
        [
            item("awskms", "us-west-2-KMS-Keys", "Keys", "1.0000000000"),
            item("awskms", "us-west-2-KMS-Requests", "Requests", "0.0000030000"),
        ],
    )
    assert {k: (v["usd"], v["usagetype"]) for k, v in found.items()} == {"kms_key_month": (1.0, "us-west-2-KMS-Keys")}


def summary(synth, capsys, tmp_path, table: dict) -> list[str]:
    """What `python -m cli.summarize OUT --config FILE --prices TABLE` prints, run in this process (tests/test_sizing.py
    and tests/test_cli.py start the command as a process)."""
    built = synth("default")
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(table))
    argv = [str(built.out_dir), "--config", str(VARIANT_FILES["default"]), "--prices", str(path)]
    result = run_main("cli.summarize", argv, capsys)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def fetched_table(instance_prices: dict[str, str]) -> dict:
    client, _ = stubbed_pricing(answers(instance_prices))
    tables, _ = prices.fetch(client, [REGION], today=TODAY)
    return json.loads(prices.merged({}, tables))


def resources(built, kind: str) -> list[dict]:
    return [
        r
        for t in [*built.templates.values(), *built.nested.values()]
        for r in t["Resources"].values()
        if r["Type"] == kind
    ]


def dollars(line: str, suffix: str) -> float:
    return float(line.split("$")[1].split(suffix)[0].replace(",", ""))


def test_the_summary_prices_what_runs_and_what_bills_at_zero(synth, capsys, tmp_path):
    out = summary(synth, capsys, tmp_path, fetched_table({"ml.m5.xlarge": "0.23", "ml.g5.8xlarge": "3.06"}))
    built = synth("default")
    cfg = built.config
    header = next(i for i, line in enumerate(out) if line.startswith("What it costs"))
    assert out[header] == (
        f"What it costs at on-demand list prices in {REGION} (price table fetched 2026-11-29 from "
        f"the {prices.API_SOURCE}; config/facts/prices.json):"
    )
    per_hour = {"ml.m5.xlarge": 0.23, "ml.g5.8xlarge": 3.06}
    instances = sum(g.instance_count * per_hour[g.instance_type] for g in cfg.cluster.instance_groups)
    lustre = cfg.storage.lustre
    fsx = lustre.storage_capacity_gib * {250: 0.21}[lustre.throughput_mib_per_tib]
    nat = len(resources(built, "AWS::EC2::NatGateway"))
    keys = len(resources(built, "AWS::KMS::Key"))
    alarms = len(resources(built, "AWS::CloudWatch::Alarm"))
    nlbs = len(
        [
            r
            for r in resources(built, "AWS::ElasticLoadBalancingV2::LoadBalancer")
            if r["Properties"].get("Type") == "network"
        ]
    )
    assert nat and keys and alarms
    floor_month = fsx + nat * 0.045 * 730 + nlbs * 0.0225 * 730 + keys * 1.0 + alarms * 0.1
    running = next(line for line in out if line.startswith("  while running: "))
    assert dollars(running, "/hour") == pytest.approx(instances + floor_month / 730, abs=0.006)
    idle = next(line for line in out if line.startswith("  idle floor, every group at 0: "))
    assert dollars(idle, "/month") == pytest.approx(floor_month, abs=0.006)
    assert "partial" not in running + idle
    for g in cfg.cluster.instance_groups:
        assert any(line.split()[:4] == [g.name, str(g.instance_count), "x", g.instance_type] for line in out), g.name
    assert any(line.split()[:3] == ["KMS", "key", str(keys)] for line in out)
    assert not any("no price on record" in line for line in out)


def test_a_type_the_table_lacks_is_said_not_guessed(synth, capsys, tmp_path):
    out = summary(synth, capsys, tmp_path, fetched_table({"ml.m5.xlarge": "0.23"}))
    assert f"  no price on record for ml.g5.8xlarge in {REGION}" in out
    running = next(line for line in out if line.startswith("  while running: "))
    assert running.endswith("/hour (partial: see 'no price on record')")


def test_a_region_the_table_lacks_is_said_not_guessed(synth, capsys, tmp_path):
    table = fetched_table({"ml.m5.xlarge": "0.23"})
    table["regions"] = {"eu-west-1": table["regions"][REGION]}
    out = summary(synth, capsys, tmp_path, table)
    line = next(line for line in out if line.startswith("What it costs"))
    assert line.startswith(f"What it costs: no price on record for {REGION} (config/facts/prices.json has eu-west-1)")
    assert not any(line.startswith("  while running") for line in out)
    assert next(line for line in out if line.startswith("  bills with every group at 0: ")).startswith(
        "  bills with every group at 0: FSx for Lustre 1200 GiB at 250 MB/s/TiB, "
    )


def test_quantities_count_interface_endpoints_per_az_and_skip_gateway_endpoints():
    template = {
        "Resources": {
            "S3": {"Type": "AWS::EC2::VPCEndpoint", "Properties": {"VpcEndpointType": "Gateway"}},
            "Ssm": {
                "Type": "AWS::EC2::VPCEndpoint",
                "Properties": {"VpcEndpointType": "Interface", "SubnetIds": ["a", "b"]},
            },
            "Alb": {"Type": "AWS::ElasticLoadBalancingV2::LoadBalancer", "Properties": {"Type": "application"}},
            "Nlb": {"Type": "AWS::ElasticLoadBalancingV2::LoadBalancer", "Properties": {"Type": "network"}},
        }
    }
    assert costs.quantities({"s": template}).standing == {"interface_endpoint_hour": 2, "network_load_balancer_hour": 1}


def test_preflight_writes_the_regions_prices_and_keeps_the_others(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text(
        json.dumps({"about": "x", "regions": {"eu-west-1": {"fetched": "2026-01-01", "source": "s", "items": {}}}})
    )
    client, stubber = stubbed_pricing(answers({"ml.m5.xlarge": "0.23"}))
    result = refresh_prices(lambda service, purpose: client, REGION, path)
    stubber.assert_no_pending_responses()
    assert result.status == OK and result.detail == f"11 prices for {REGION} written to {path}"
    table = json.loads(path.read_text())
    assert sorted(table["regions"]) == ["eu-west-1", REGION]
    assert table["regions"][REGION]["items"]["hyperpod_instance_hour:ml.m5.xlarge"]["usd"] == 0.23


def test_preflight_warns_about_an_ambiguous_price(tmp_path):
    pages = answers({"ml.m5.xlarge": "0.23"})
    pages["kms_key_month"] = [
        [item("awskms", "us-west-2-KMS-Keys", "Keys", "1.0"), item("awskms", "KMS-Keys", "Keys", "2")]
    ]
    client, _ = stubbed_pricing(pages)
    result = refresh_prices(lambda service, purpose: client, REGION, tmp_path / "prices.json")
    assert result.status == WARNING
    assert "left out (ambiguous): us-west-2 kms_key_month: 2 different prices" in result.detail
    assert "kms_key_month" not in json.loads((tmp_path / "prices.json").read_text())["regions"][REGION]["items"]


def test_preflight_without_pricing_permission_leaves_the_table_alone(tmp_path):
    path = tmp_path / "prices.json"
    path.write_text("{}")
    client = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stubber:
        stubber.add_client_error("get_products", "AccessDeniedException", "no", 400)
        result = refresh_prices(lambda service, purpose: client, REGION, path)
    assert result.status == UNKNOWN and result.detail.startswith("cannot refresh: AccessDeniedException on GetProducts")
    assert path.read_text() == "{}"
