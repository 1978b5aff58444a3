"""Studio lifecycle configs (JupyterLab and Code Editor) that make a space a Slurm login node or an EKS client.

The scripts in lifecycle/studio/ are shipped to the lifecycle bucket as an asset; the lifecycle config itself is
a short bootstrap that copies them into the space and runs them, so the scripts are not bound by the lifecycle
config's 16 KB content limit and are reviewed and tested as ordinary files.
"""
from __future__ import annotations

import hashlib
import json
from typing import Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct
from constructs.lifecycle_scripts import STUDIO_SCRIPTS_DIR, LifecycleScripts

SLURM_ENTRY_POINT = "slurm_login_node.sh"
EKS_ENTRY_POINT = "eks_login_node.sh"
BOOTSTRAP = """#!/bin/bash
# Copies this platform's Studio scripts from the lifecycle bucket and runs {entry}.
set -euo pipefail
{exports}export AWS_DEFAULT_REGION='{region}'
scripts="$HOME/.studio-lifecycle/scripts"
mkdir -p "$scripts"
aws s3 cp --quiet --recursive '{source}' "$scripts/"
exec bash "$scripts/{entry}"
"""
NAME_LIMIT = 63  # StudioLifecycleConfigName: 1-63 of [a-zA-Z0-9-]


def lifecycle_config_name(platform: str, role: str, app: str, content: object) -> str:
    """A name that changes whenever the content does. Name, content, app type and tags of a Studio lifecycle
    config are all create-only (its CloudFormation schema), so a new script must be a new resource; with a fixed
    name CloudFormation could not create the replacement beside the old one and the update would fail."""
    digest = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:10]
    suffix = f"-{role}-{app}-{digest}"
    return f"{platform[:NAME_LIMIT - len(suffix)].rstrip('-')}{suffix}"


class StudioLifecycleConfigs(Construct):
    def __init__(self, scope: Construct, id_: str, *, name: str, bucket: s3.IBucket, entry_point: str,
                 upload_role_name: str,
                 environment: Mapping[str, str], extra_sources: Sequence[s3deploy.ISource] = ()) -> None:
        """`environment` values may hold deploy-time tokens; `extra_sources` are shipped beside the scripts."""
        super().__init__(scope, id_)
        self.scripts = LifecycleScripts(self, "Scripts", bucket=bucket, prefix=f"studio/{name}",
                                        upload_role_name=upload_role_name, source_dir=STUDIO_SCRIPTS_DIR, extra_sources=extra_sources)
        if not (STUDIO_SCRIPTS_DIR / entry_point).exists():
            raise FileNotFoundError(f"{STUDIO_SCRIPTS_DIR / entry_point} is missing")
        # Fn::Sub fills in deploy-time values; the script's own variables are escaped as ${!name}.
        exports = "".join(f"export {key}='${{{key}}}'\n" for key in environment)
        bootstrap = BOOTSTRAP.format(exports=exports, region="${AWS::Region}", source="${Source}", entry=entry_point)
        bootstrap = bootstrap.replace("$HOME", "${!HOME}").replace('"$scripts', '"${!scripts}')
        content = cdk.Fn.base64(cdk.Fn.sub(bootstrap, {**environment, "Source": self.scripts.source_s3_uri}))
        role = entry_point.removesuffix(".sh").replace("_node", "").replace("_", "-")  # slurm-login / eks-login
        # The content as CloudFormation will see it (deploy-time references as their Ref/GetAtt expressions). The
        # scripts themselves live in S3 and are copied at app start, so editing them changes no lifecycle config;
        # editing the bootstrap or an exported value (e.g. the kubectl checksum on EKS) makes a new one.
        resolved = cdk.Stack.of(self).resolve(content)
        self.jupyter_lab = sagemaker.CfnStudioLifecycleConfig(
            self, "JupyterLab", studio_lifecycle_config_name=lifecycle_config_name(name, role, "jupyterlab", resolved),
            studio_lifecycle_config_app_type="JupyterLab", studio_lifecycle_config_content=content)
        self.code_editor = sagemaker.CfnStudioLifecycleConfig(
            self, "CodeEditor", studio_lifecycle_config_name=lifecycle_config_name(name, role, "codeeditor", resolved),
            studio_lifecycle_config_app_type="CodeEditor", studio_lifecycle_config_content=content)
        for config in (self.jupyter_lab, self.code_editor):
            config.node.add_dependency(self.scripts.deployment)
        self.jupyter_lab_arn = self.jupyter_lab.attr_studio_lifecycle_config_arn
        self.code_editor_arn = self.code_editor.attr_studio_lifecycle_config_arn
