#!/usr/bin/env python3
"""Stand-in for the AWS CLI calls the lifecycle scripts make, used only when the test machine has no AWS CLI (a
clean CI machine). It speaks to the same moto server through boto3 (AWS_ENDPOINT_URL).

    aws secretsmanager get-secret-value --secret-id ARN [--region R] --query SecretString --output text
    aws secretsmanager put-secret-value --secret-id ARN [--region R] --secret-string file://PATH
    aws s3 cp [--only-show-errors] [--region R] SOURCE DESTINATION   (one side s3://bucket/key, the other a file)
    aws sts assume-role --role-arn ARN --role-session-name NAME [--duration-seconds N] [--region R] --output json
"""

from __future__ import annotations

import argparse
import json
import sys

import boto3
from botocore.exceptions import ClientError


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="aws")
    services = parser.add_subparsers(dest="service", required=True)
    secrets = services.add_parser("secretsmanager")
    secrets.add_argument("operation", choices=["get-secret-value", "put-secret-value"])
    secrets.add_argument("--secret-id", required=True)
    secrets.add_argument("--region")
    secrets.add_argument("--query")
    secrets.add_argument("--output")
    secrets.add_argument("--secret-string")
    s3 = services.add_parser("s3")
    s3.add_argument("operation", choices=["cp"])
    s3.add_argument("--only-show-errors", action="store_true")
    s3.add_argument("--region")
    s3.add_argument("source")
    s3.add_argument("destination")
    sts = services.add_parser("sts")
    sts.add_argument("operation", choices=["assume-role"])
    sts.add_argument("--role-arn", required=True)
    sts.add_argument("--role-session-name", required=True)
    sts.add_argument("--duration-seconds", type=int, default=3600)
    sts.add_argument("--region")
    sts.add_argument("--output", choices=["json"], required=True)
    args = parser.parse_args(argv)
    if (
        args.service == "secretsmanager"
        and args.operation == "get-secret-value"
        and (args.query != "SecretString" or args.output != "text")
    ):
        parser.error("only --query SecretString --output text is supported")
    if args.service == "s3" and args.source.startswith("s3://") == args.destination.startswith("s3://"):
        parser.error("exactly one of SOURCE and DESTINATION is an s3:// URI")
    return args


def s3_location(uri: str) -> tuple[str, str]:
    bucket, _, key = uri[len("s3://") :].partition("/")
    return bucket, key


def main(argv: list[str]) -> int:
    args = parse(argv)
    try:
        if args.service == "sts":
            client = boto3.client("sts", region_name=args.region)
            response = client.assume_role(
                RoleArn=args.role_arn, RoleSessionName=args.role_session_name, DurationSeconds=args.duration_seconds
            )
            response.pop("ResponseMetadata", None)
            print(json.dumps(response, default=lambda t: t.isoformat()))  # the CLI prints datetimes as ISO 8601
        elif args.service == "s3":
            client = boto3.client("s3", region_name=args.region)
            if args.source.startswith("s3://"):
                client.download_file(*s3_location(args.source), args.destination)
            else:
                client.upload_file(args.source, *s3_location(args.destination))
        elif args.operation == "get-secret-value":
            client = boto3.client("secretsmanager", region_name=args.region)
            print(client.get_secret_value(SecretId=args.secret_id)["SecretString"])
        else:
            client = boto3.client("secretsmanager", region_name=args.region)
            value = args.secret_string
            if value.startswith("file://"):
                with open(value[len("file://") :]) as f:
                    value = f.read()
            print(json.dumps(client.put_secret_value(SecretId=args.secret_id, SecretString=value)["VersionId"]))
    except ClientError as e:
        print(f"An error occurred ({e.response['Error']['Code']}): {e}", file=sys.stderr)
        return 254
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
