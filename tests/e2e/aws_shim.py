#!/usr/bin/env python3
"""Stand-in for the two `aws secretsmanager` calls the lifecycle scripts make, used only when the
test machine has no AWS CLI. It speaks to the same moto server through boto3 (AWS_ENDPOINT_URL).

    aws secretsmanager get-secret-value --secret-id ARN [--region R] --query SecretString --output text
    aws secretsmanager put-secret-value --secret-id ARN [--region R] --secret-string file://PATH
"""
from __future__ import annotations

import argparse
import json
import sys

import boto3
from botocore.exceptions import ClientError


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="aws")
    parser.add_argument("service", choices=["secretsmanager"])
    parser.add_argument("operation", choices=["get-secret-value", "put-secret-value"])
    parser.add_argument("--secret-id", required=True)
    parser.add_argument("--region")
    parser.add_argument("--query")
    parser.add_argument("--output")
    parser.add_argument("--secret-string")
    args = parser.parse_args(argv)
    client = boto3.client("secretsmanager", region_name=args.region)
    try:
        if args.operation == "get-secret-value":
            if args.query != "SecretString" or args.output != "text":
                parser.error("only --query SecretString --output text is supported")
            print(client.get_secret_value(SecretId=args.secret_id)["SecretString"])
        else:
            value = args.secret_string
            if value.startswith("file://"):
                with open(value[len("file://"):]) as f:
                    value = f.read()
            print(json.dumps(client.put_secret_value(SecretId=args.secret_id, SecretString=value)["VersionId"]))
    except ClientError as e:
        print(f"An error occurred ({e.response['Error']['Code']}): {e}", file=sys.stderr)
        return 254
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
