"""A value one stack hands another through an output it reads with Fn::GetStackOutput, where a plain cross-stack
reference would not do."""

from __future__ import annotations

import aws_cdk as cdk


def output_for_another_stack(producer: cdk.Stack, output_id: str, *, value: str, description: str) -> str:
    """`value` as the output `output_id` of `producer` (at its top level, so the output's logical id comes from
    `output_id` alone), and the Fn::GetStackOutput that reads it in the stack that uses the returned string. That
    stack must be deployed after `producer` (add_stack_dependency)."""
    output = cdk.CfnOutput(producer, output_id, value=value, description=description)
    return cdk.Token.as_string(
        cdk.Intrinsic(
            {
                "Fn::GetStackOutput": {
                    "StackName": producer.stack_name,
                    "Region": producer.region,
                    "OutputName": output.logical_id,
                }
            }
        )
    )
