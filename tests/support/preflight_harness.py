"""What cli/preflight.py's tests give it as AWS: real clients at a moto server, and Stubber-backed clients (their
answers queued by the test) for the APIs moto 5.2 lacks. Used by tests/test_preflight.py,
tests/test_preflight_eks.py and tests/test_preflight_attach.py, whose `account` fixture is {"endpoint": moto's URL},
emptied before each test; by_check: the results of a run by the name of their check."""

from __future__ import annotations

from functools import cache

import boto3
from botocore.stub import Stubber

from support.moto_server import client

REGION = "us-west-2"


def real(account, service):
    return _real(account["endpoint"], service)


@cache
def _real(endpoint: str, service: str):
    """One client per moto server and service for the process: a client holds no account state (each test empties
    moto's), and making one builds its class anew (EC2's 700-odd operations, ~15 ms of CPU)."""
    return client(endpoint, service, REGION, read_timeout=120)


class Harness:
    """Real moto clients; Stubber-backed clients for the APIs moto lacks, each with its queued answers."""

    def __init__(self, account):
        self.account = account
        self.stubbed: dict[tuple[str, str], tuple[object, Stubber]] = {}
        self.real: dict[str, object] = {}

    def stub(self, service: str, purpose: str) -> Stubber:
        client = boto3.client(service, region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
        stubber = Stubber(client)
        stubber.activate()
        self.stubbed[(service, purpose)] = (client, stubber)
        return stubber

    def client(self, service: str, purpose: str):
        if (service, purpose) in self.stubbed:
            return self.stubbed[(service, purpose)][0]
        if service not in self.real:
            self.real[service] = real(self.account, service)
        return self.real[service]


def by_check(results):
    return {r.check: r for r in results}
