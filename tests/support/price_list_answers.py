"""GetProducts answers for cli/prices.py's queries, on a botocore Stubber (moto 5.2 has no Price List API); the
Stubber checks each request and answer against botocore's model of the pricing API. The PriceList items follow the
API's JSON (product, attributes, sku, terms.OnDemand priceDimensions); their prices are test inputs, not AWS's."""

from __future__ import annotations

import json

import boto3
from botocore.stub import Stubber

from cli import prices

REGION = "us-west-2"


def item(service: str, usagetype: str, unit: str, usd: str, family: str = "x", **attributes) -> str:
    sku = f"SKU{abs(hash((service, usagetype, usd, tuple(sorted(attributes.items()))))) % 10**8:08d}"
    return json.dumps(
        {
            "serviceCode": service,
            "product": {
                "productFamily": family,
                "sku": sku,
                "attributes": {"usagetype": usagetype, "regionCode": REGION, **attributes},
            },
            "terms": {
                "OnDemand": {
                    f"{sku}.JRTCKXETXF": {
                        "priceDimensions": {
                            f"{sku}.JRTCKXETXF.6YS6EN2CT7": {
                                "unit": unit,
                                "beginRange": "0",
                                "endRange": "Inf",
                                "pricePerUnit": {"USD": usd},
                            }
                        }
                    }
                }
            },
        }
    )


def answers(instance_prices: dict[str, str]) -> dict[str, list[list[str]]]:
    """Per query key, the pages GetProducts answers for us-west-2."""
    return {
        "hyperpod_instance_hour:{0}": [
            [
                item("AmazonSageMaker", f"USW2-Cluster:{t}", "Hrs", usd, "ML Instance")
                for t, usd in list(instance_prices.items())[:1]
            ],
            [
                item("AmazonSageMaker", f"USW2-Cluster:{t}", "Hrs", usd, "ML Instance")
                for t, usd in list(instance_prices.items())[1:]
            ]
            # what the CONTAINS filter can also return: a reserved-capacity line, not the on-demand one
            + [item("AmazonSageMaker", "USW2-ReservedCluster:ml.m5.xlarge", "Hrs", "9.99", "ML Instance")],
        ],
        "nat_gateway_hour": [
            [
                item("AmazonEC2", "USW2-NatGateway-Hours", "Hrs", "0.045", "NAT Gateway"),
                item("AmazonEC2", "USW2-NatGateway-Bytes", "GB", "0.045", "NAT Gateway"),
            ]
        ],
        "network_load_balancer_hour": [[item("AWSELB", "USW2-LoadBalancerUsage", "Hrs", "0.0225")]],
        "interface_endpoint_hour": [[item("AmazonVPC", "USW2-VpcEndpoint-Hours", "Hrs", "0.01")]],
        "kms_key_month": [[item("awskms", "us-west-2-KMS-Keys", "Keys", "1.0000000000")]],
        "cloudwatch_alarm_month": [[item("AmazonCloudWatch", "USW2-CW:AlarmMonitorUsage", "Alarms", "0.10")]],
        "eks_cluster_hour": [[item("AmazonEKS", "USW2-AmazonEKS-Hours:perCluster", "Hours", "0.10")]],
        **{
            f"fsx_lustre_ssd_gb_month:{tier}": [
                [
                    item(
                        "AmazonFSx",
                        f"USW2-Storage-SSD-{tier}",
                        "GB-Mo",
                        usd,
                        fileSystemType="Lustre",
                        storageType="SSD",
                        throughputCapacity=str(tier),
                    )
                ]
            ]
            for tier, usd in ((125, "0.145"), (250, "0.21"), (500, "0.29"), (1000, "0.6"))
        },
    }


def stubbed_pricing(pages_by_key: dict[str, list[list[str]]], region: str = REGION):
    client = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    stubber = Stubber(client)
    for query in prices.queries():
        pages = pages_by_key[query.key]
        for n, page in enumerate(pages):
            token = f"page-{n + 1}" if n + 1 < len(pages) else None
            expected = prices.request(query, region) | ({"NextToken": f"page-{n}"} if n else {})
            stubber.add_response(
                "get_products",
                {"FormatVersion": "aws_v1", "PriceList": page, **({"NextToken": token} if token else {})},
                expected,
            )
    stubber.activate()
    return client, stubber
