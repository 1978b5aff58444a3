"""Why the last deployment failed, and what to do: reads CloudFormation's events of the platform's stacks, the HyperPod
cluster (DescribeCluster, ListClusterNodes), the nodes' lifecycle-script logs (their STEP-START/STEP-END/STEP-FAILED
markers, lifecycle/hyperpod/lib/common.sh `step`) and the FSx file systems, and names each problem from CATALOGUE,
with its fix.

    make diagnose CONFIG=config/my-cluster.yaml [BUNDLE=1]
    python -m cli.diagnose --config config/my-cluster.yaml [--bundle] [--profile P]
    python -m cli.diagnose --catalogue        # the catalogue as Markdown (docs/deploy.md, "My first deploy failed")

--bundle also writes build/diagnose-<name>-<time>.tar.gz for a support case: the status report, the evidence read and
the findings, with access keys, secrets, tokens, passwords and private keys replaced by [REDACTED]. Read-only.
Exit status: 0 nothing wrong found, 1 problems found, 2 could not look (no credentials, a refused call).
"""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path


from cli.preconditions import one_line
from cli.status import failed_events, file_systems, platform_stacks, report, session_for, target
from cli.watch import cluster_log_group, cluster_nodes

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class FailureClass:
    key: str
    title: str
    pattern: str  # searched (case-insensitive) in every piece of evidence
    fix: str


# The failure classes, most specific first; the error codes are those of the AWS APIs (botocore's models: EC2
# InsufficientInstanceCapacity, SageMaker ResourceLimitExceeded, InsufficientFreeAddressesInSubnet) and the wording
# of the messages CloudFormation, HyperPod and FSx put in events and FailureMessage.
CATALOGUE = (
    FailureClass(
        "lifecycle-step",
        "A lifecycle script failed on a node",
        r"STEP-FAILED (?P<step>[a-z0-9_-]+) rc=(?P<rc>\d+)",
        "Read the step's last lines (below, or `make logs NODE=<group>:<index>`); fix the script or the parameter it "
        "names, then `make deploy` again. While debugging, `make deploy ARGS=--no-rollback` keeps the failed cluster "
        "so you can `make connect NODE=<group>:<index>` and rerun the step by hand (/var/log/provision/ on the node).",
    ),
    FailureClass(
        "capacity",
        "Not enough capacity for an instance type in the Availability Zone, or the AZ does not offer it",
        r"InsufficientInstanceCapacity|insufficient capacity|not have sufficient capacity|capacity is not available"
        r"|not supported in (?:the|your requested) Availability Zone|does not support the instance type"
        r"|instance type .* is not (?:supported|available) in",
        "Pick an AZ ID that offers the type (`aws ec2 describe-instance-type-offerings --location-type "
        "availability-zone-id --filters Name=instance-type,Values=<type without ml.>`), use a training plan or "
        "capacity reservation (`cluster.instance_groups[].training_plan_arn`), or lower `instance_count` and scale "
        "up later. `make preflight` checks the offering; only a create call shows actual capacity.",
    ),
    FailureClass(
        "quota",
        "A service quota is too low",
        r"ResourceLimitExceeded|ServiceQuotaExceeded|LimitExceeded|exceed(?:s|ed)? (?:the |your )?(?:account-level )?"
        r"(?:service )?(?:quota|limit)|quota (?:of|for) .* (?:exceeded|reached)",
        "Request an increase in Service Quotas for the quota the message names (for instances: `ml.<type> for "
        "cluster usage` in SageMaker), or lower the count. `make preflight` compares the config with your quotas.",
    ),
    FailureClass(
        "iam-denied",
        "An IAM principal was denied an action",
        r"(?:(?P<principal>arn:aws[\w-]*:(?:iam|sts)::\d{12}:[\w+=,.@/-]+) is not authorized to perform:? "
        r"(?P<action>[\w-]+:[\w*]+))|AccessDenied|not authorized to perform",
        "Grant the named action to the named role (for the deploying principal: your CDK deploy role or the "
        "`cdk bootstrap` execution policy; for the cluster's execution role: the construct that builds it), or ask "
        "the account's administrator about the SCP or permissions boundary that denies it. `make preflight` checks the "
        "service-linked roles.",
    ),
    FailureClass(
        "subnet-addresses",
        "A subnet ran out of IP addresses",
        r"InsufficientFreeAddressesInSubnet|free (?:IP )?addresses|not enough (?:free )?IP addresses"
        r"|IP addresses available in (?:the )?subnet",
        "Each node needs one address plus one per EFA interface. Append a larger subnet "
        "(`network.private_subnet_cidrs`, with its AZ in `network.az_ids`) or lower `instance_count`; `make preflight` "
        "checks subnet sizes.",
    ),
    FailureClass(
        "fsx-network",
        "FSx for Lustre cannot be mounted, or its security group lacks the Lustre ports",
        r"port 988|ports? 1018|LNET|mount\.lustre|mount_fsx|Lustre.*mount|mount.*Lustre|FSx.*(?:unreachable|timed out)",
        "Lustre needs TCP 988 and 1018-1023 between the nodes and the file system, both ways, in its security "
        "group(s); with `storage.lustre.existing` or `network.existing`, add those rules to the groups you bring. "
        "Check "
        "the file system is AVAILABLE (`make status`) and in the cluster's VPC.",
    ),
    FailureClass(
        "rollback-cause",
        "A stack rolled back: the first resource that failed",
        r"_FAILED",
        "The first failure is the cause; the resources after it were cancelled. Fix what its reason says and "
        "`make deploy` again (a stack in UPDATE_ROLLBACK_FAILED needs `aws cloudformation continue-update-rollback` "
        "first).",
    ),
)


@dataclass(frozen=True)
class Evidence:
    source: str
    text: str


@dataclass(frozen=True)
class Finding:
    failure: FailureClass
    source: str
    detail: str

    def __str__(self) -> str:
        return (
            f"{self.failure.title} [{self.failure.key}]\n  where: {self.source}\n  what: {self.detail}\n"
            f"  fix: {self.failure.fix}"
        )


MARKER = re.compile(
    r"^(?P<time>\S+) \[(?P<script>[^\]]+)\] STEP-(?P<kind>START|END|FAILED) (?P<step>[a-z0-9_-]+)"
    r"(?: rc=(?P<rc>\d+))?"
)


def failed_step(log: str, context: int = 8) -> str | None:
    """ "script <s>, step <n>, exit code <rc>; last lines: ..." from a node's log, None when no step failed."""
    lines = log.splitlines()
    for position in range(len(lines) - 1, -1, -1):
        marker = MARKER.match(lines[position])
        if marker and marker["kind"] == "FAILED":
            start = max(
                (
                    i
                    for i in range(position)
                    if (m := MARKER.match(lines[i])) and m["kind"] == "START" and m["step"] == marker["step"]
                ),
                default=0,
            )
            body = [
                line
                for line in lines[start + 1 : position]
                if not MARKER.match(line) and "FAILED with exit code" not in line
            ]
            last = " | ".join(line.strip() for line in body[-context:])
            return f"script {marker['script']}, step {marker['step']}, exit code {marker['rc']}; last lines: {last}"
    return None


def classify(evidence: list[Evidence]) -> list[Finding]:
    """Every piece of evidence with the first class that matches it; a stack's failures only as the rollback cause
    when nothing more specific explains them."""
    findings: list[Finding] = []
    for item in evidence:
        for failure in CATALOGUE:
            match = re.search(failure.pattern, item.text, re.IGNORECASE)
            if not match:
                continue
            if failure.key == "lifecycle-step":
                detail = failed_step(item.text) or one_line(Exception(item.text))
            elif failure.key == "iam-denied" and match.groupdict().get("action"):
                detail = f"{match['principal']} may not {match['action']}: {one_line(Exception(item.text))}"
            else:
                detail = one_line(Exception(item.text))
            findings.append(Finding(failure, item.source, detail))
            break
    specific = [f for f in findings if f.failure.key != "rollback-cause"]
    return specific + [f for f in findings if f.failure.key == "rollback-cause"][: 0 if specific else 1]


def gather(session, tgt, log_lines: int = 200) -> list[Evidence]:
    from botocore.exceptions import ClientError

    evidence = []
    cfn = session.client("cloudformation", region_name=tgt.region)
    for stack in platform_stacks(cfn, tgt.name, nested=True):  # a nested stack's own failure is the precise one
        for event in failed_events(cfn, stack["StackName"]):
            evidence.append(
                Evidence(
                    f"CloudFormation {stack['StackName']}: {event['LogicalResourceId']} ({event['ResourceType']}) "
                    f"{event['ResourceStatus']}",
                    f"{event['ResourceStatus']}: {event.get('ResourceStatusReason', '')}",
                )
            )
    sagemaker = session.client("sagemaker", region_name=tgt.region)
    logs = session.client("logs", region_name=tgt.region)
    try:
        cluster = sagemaker.describe_cluster(ClusterName=tgt.name)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") not in ("ResourceNotFound", "ValidationException"):
            raise
        cluster = None
    if cluster:
        if cluster.get("FailureMessage"):
            evidence.append(Evidence(f"cluster {tgt.name} {cluster['ClusterStatus']}", cluster["FailureMessage"]))
        log_group = cluster_log_group(cluster["ClusterArn"], tgt.name)
        by_group: dict[str, int] = {}
        for node in cluster_nodes(sagemaker, tgt.name):
            group = node["InstanceGroupName"]
            index = by_group[group] = by_group.get(group, -1) + 1
            where = f"node {group}:{index} {node['InstanceId']}"
            state = node["InstanceStatus"]
            if state["Status"] != "Running" and state.get("Message"):
                evidence.append(Evidence(f"{where} {state['Status']}", state["Message"]))
            try:
                events = logs.get_log_events(
                    logGroupName=log_group,
                    limit=log_lines,
                    startFromHead=False,
                    logStreamName=f"LifecycleConfig/{group}/{node['InstanceId']}",
                )["events"]
            except ClientError as error:
                if error.response.get("Error", {}).get("Code") != "ResourceNotFoundException":
                    raise
                continue
            text = "\n".join(e["message"].rstrip("\n") for e in events)
            if "STEP-FAILED" in text or "FAILED with exit code" in text:
                evidence.append(Evidence(f"{where}, log LifecycleConfig/{group}/{node['InstanceId']}", text))
    for system in file_systems(session.client("fsx", region_name=tgt.region), tgt.name):
        message = system.get("FailureDetails", {}).get("Message")
        if system.get("Lifecycle") in ("FAILED", "MISCONFIGURED", "MISCONFIGURED_UNAVAILABLE") or message:
            evidence.append(Evidence(f"FSx {system['FileSystemId']} {system.get('Lifecycle')}", message or ""))
    return evidence


SECRETS = (
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), "[REDACTED]"),
    (re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.DOTALL), "[REDACTED]"),
    (
        re.compile(
            r"(?i)((?:secret|password|passwd|token|session_token|private_key|api_key)[\w-]*[\"']?\s*[:=]\s*[\"']?)"
            r"[^\s\"',}]+"
        ),
        r"\1[REDACTED]",
    ),
    (re.compile(r"\b[A-Za-z0-9/+]{40}\b"), "[REDACTED]"),  # the shape of a secret access key
)


def redact(text: str) -> str:
    for pattern, replacement in SECRETS:
        text = pattern.sub(replacement, text)
    return text


def bundle(path: Path, status: list[str], evidence: list[Evidence], findings: list[Finding]) -> Path:
    files = {
        "status.txt": "\n".join(status) + "\n",
        "findings.txt": "\n\n".join(str(f) for f in findings) + "\n",
        "evidence.json": json.dumps([e.__dict__ for e in evidence], indent=1),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for name, content in files.items():
            data = redact(content).encode()
            info = tarfile.TarInfo(f"{path.name.removesuffix('.tar.gz')}/{name}")
            info.size, info.mtime, info.mode = len(data), int(time.time()), 0o600
            tar.addfile(info, io.BytesIO(data))
    path.chmod(0o600)
    return path


def catalogue_markdown() -> str:
    lines = ["| Class | What it means | Fix |", "|---|---|---|"]
    for failure in CATALOGUE:
        lines.append(f"| `{failure.key}` | {failure.title} | {failure.fix} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None, session=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cli.diagnose", description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="config/default.yaml")
    parser.add_argument("--profile")
    parser.add_argument("--bundle", action="store_true", help="also write a redacted tarball under build/")
    parser.add_argument("--catalogue", action="store_true", help="print the failure catalogue as Markdown and exit")
    args = parser.parse_args(argv)
    if args.catalogue:
        print(catalogue_markdown(), end="")
        return 0
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        session = session or session_for(args.profile, "diagnose")
        tgt = target(args.config)
        evidence = gather(session, tgt)
        findings = classify(evidence)
        for finding in findings:
            print(finding)
        if not findings:
            print(
                f"diagnose: nothing failed that CloudFormation, the cluster {tgt.name}, its nodes' lifecycle logs or "
                "FSx report; `make status` shows where everything is"
            )
        if args.bundle:
            path = ROOT / "build" / f"diagnose-{tgt.name}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}.tar.gz"
            print(
                f"bundle: {bundle(path, report(session, tgt), evidence, findings)} (redacted; attach it to a "
                "support case)"
            )
    except SystemExit as stop:
        print(stop if str(stop).startswith("diagnose:") else f"diagnose: {stop}", file=sys.stderr)
        return 2
    except (BotoCoreError, ClientError) as error:
        print(f"diagnose: {one_line(error)}", file=sys.stderr)
        return 2
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
