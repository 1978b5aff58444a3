"""Studio lifecycle configs (JupyterLab and Code Editor) that make a space a Slurm login node or an EKS client.

The scripts in lifecycle/studio/ are shipped to the lifecycle bucket as an asset; the lifecycle config itself is
a short bootstrap that copies them into the space and runs them, so the scripts are not bound by the lifecycle
config's 16 KB content limit and are reviewed and tested as ordinary files.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from collections.abc import Mapping, Sequence

import aws_cdk as cdk
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct
from constructs.lifecycle_scripts import (
    STUDIO_SCRIPTS_DIR,
    LifecycleScripts,
    keep_link_only_if_staged,
    prebuilt_zip_source,
    shipped_digests,
)
from constructs.studio_tools import EksctlArtifact, StudioToolsBundle

SLURM_ENTRY_POINT = "slurm_login_node.sh"
EKS_ENTRY_POINT = "eks_login_node.sh"
BOOTSTRAP = """#!/bin/bash
# Copies this platform's Studio scripts from the lifecycle bucket, checks every one against the SHA-256 fixed in
# this lifecycle config at synth time, and only then runs {entry}. A mismatch runs nothing.
set -euo pipefail
{exports}export AWS_DEFAULT_REGION='{region}'
scripts="$HOME/.studio-lifecycle/scripts"
fetched="$(mktemp -d)"
trap 'rm -rf "$fetched"' EXIT
aws s3 cp --quiet --recursive '{source}' "$fetched/"
if ! (cd "$fetched" && sha256sum --check --strict --quiet) <<'DIGESTS'
{digests}DIGESTS
then
  echo "studio-lifecycle: a script under {source} does not match its SHA-256 in this lifecycle config; ran nothing" >&2
  exit 1
fi
rm -rf "$scripts"
mkdir -p "$scripts"
while read -r _ file; do
  mkdir -p "$(dirname "$scripts/$file")"
  cp "$fetched/$file" "$scripts/$file"
done <<'DIGESTS'
{digests}DIGESTS
rm -rf "$fetched"
trap - EXIT
{tools}exec bash "$scripts/{entry}"
"""
# With studio.tools.hyp_and_jq: the tools install in the background (studio_tools.sh detaches); a failure there is
# reported and never keeps the space from starting or from the login set-up.
TOOLS_STEP = (
    'bash "$scripts/studio_tools.sh" || echo "studio-lifecycle: hyp and jq were not installed; see '
    '$HOME/.studio-tools/setup.log" >&2\n'
)
ASSET_EXCLUDE = ["**/__pycache__", "*.md"]


def render_bootstrap(
    *, exports: str, region: str, source: str, entry: str, digests: Mapping[str, str], tools: bool = False
) -> str:
    """The bootstrap as bash will run it; `sha256sum --check` reads the "<digest>  <path>" lines."""
    lines = "".join(f"{digest}  {path}\n" for path, digest in sorted(digests.items()))
    return BOOTSTRAP.format(
        exports=exports, region=region, source=source, entry=entry, digests=lines, tools=TOOLS_STEP if tools else ""
    )


NAME_LIMIT = 63  # StudioLifecycleConfigName: 1-63 of [a-zA-Z0-9-]


def lifecycle_config_name(platform: str, role: str, app: str, content: object) -> str:
    """A name that changes whenever the content does. Name, content, app type and tags of a Studio lifecycle
    config are all create-only (its CloudFormation schema), so a new script must be a new resource; with a fixed
    name CloudFormation could not create the replacement beside the old one and the update would fail."""
    digest = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:10]
    suffix = f"-{role}-{app}-{digest}"
    return f"{platform[: NAME_LIMIT - len(suffix)].rstrip('-')}{suffix}"


class StudioLifecycleConfigs(Construct):
    def __init__(
        self,
        scope: Construct,
        id_: str,
        *,
        name: str,
        bucket: s3.IBucket,
        entry_point: str,
        upload_role_name: str,
        environment: Mapping[str, str],
        extra_dirs: Sequence[Path] = (),
        tools: StudioToolsBundle | None = None,
        eksctl: EksctlArtifact | None = None,
    ) -> None:
        """`environment` values may hold deploy-time tokens; the files in `extra_dirs` are shipped beside the
        scripts and checked like them. `tools` (hyp, jq: the packed bundle, extracted into the prefix) and `eksctl`
        go to a prefix of their own, which the space copies only when its installed tools differ (their digests are
        in this config, not the files)."""
        super().__init__(scope, id_)
        self.scripts = LifecycleScripts(
            self,
            "Scripts",
            bucket=bucket,
            prefix=f"studio/{name}",
            upload_role_name=upload_role_name,
            source_dir=STUDIO_SCRIPTS_DIR,
            extra_sources=[s3deploy.Source.asset(str(d), exclude=ASSET_EXCLUDE) for d in extra_dirs],
        )
        if not (STUDIO_SCRIPTS_DIR / entry_point).exists():
            raise FileNotFoundError(f"{STUDIO_SCRIPTS_DIR / entry_point} is missing")
        self.digests = shipped_digests([STUDIO_SCRIPTS_DIR, *extra_dirs])
        self.tools: LifecycleScripts | None = None
        environment = dict(environment)
        if tools or eksctl:
            # Not beside the scripts: the bootstrap copies that prefix at every start, the tools only when needed.
            sources = [prebuilt_zip_source(self, tools.archive, tools.archive_sha256)] if tools else []
            if eksctl:
                sources.append(s3deploy.Source.asset(str(eksctl.directory)))
            self.tools = tool_scripts = LifecycleScripts(
                self,
                "Tools",
                bucket=bucket,
                prefix=f"studio-tools/{name}",
                upload_role_name=upload_role_name,
                source_dir=None,
                extra_sources=sources,
            )
            if tools:
                keep_link_only_if_staged(tool_scripts.deployment, tools.archive, tools.archive_sha256)
                environment.update(
                    STUDIO_TOOLS_S3_URI=tool_scripts.source_s3_uri, STUDIO_TOOLS_SHA256=tools.manifest_sha256
                )
            if eksctl:
                environment.update(
                    EKSCTL_S3_URI=f"{tool_scripts.source_s3_uri}{eksctl.key}", EKSCTL_SHA256=eksctl.sha256
                )
        # Fn::Sub fills in deploy-time values; the script's own variables are escaped as ${!name}.
        exports = "".join(f"export {key}='${{{key}}}'\n" for key in environment)
        bootstrap = render_bootstrap(
            exports=exports,
            region="${AWS::Region}",
            source="${Source}",
            entry=entry_point,
            digests=self.digests,
            tools=tools is not None,
        )
        bootstrap = bootstrap.replace("$HOME", "${!HOME}").replace('"$scripts', '"${!scripts}')
        content = cdk.Fn.base64(cdk.Fn.sub(bootstrap, {**environment, "Source": self.scripts.source_s3_uri}))
        role = entry_point.removesuffix(".sh").replace("_node", "").replace("_", "-")  # slurm-login / eks-login
        # The content as CloudFormation will see it (deploy-time references as their Ref/GetAtt expressions). The
        # scripts live in S3 and are copied at app start; their digests are in the bootstrap, so editing a script,
        # the bootstrap or an exported value (e.g. the kubectl checksum on EKS) makes a new lifecycle config.
        resolved = cdk.Stack.of(self).resolve(content)
        self.jupyter_lab = sagemaker.CfnStudioLifecycleConfig(
            self,
            "JupyterLab",
            studio_lifecycle_config_name=lifecycle_config_name(name, role, "jupyterlab", resolved),
            studio_lifecycle_config_app_type="JupyterLab",
            studio_lifecycle_config_content=content,
        )
        self.code_editor = sagemaker.CfnStudioLifecycleConfig(
            self,
            "CodeEditor",
            studio_lifecycle_config_name=lifecycle_config_name(name, role, "codeeditor", resolved),
            studio_lifecycle_config_app_type="CodeEditor",
            studio_lifecycle_config_content=content,
        )
        for config in (self.jupyter_lab, self.code_editor):
            config.node.add_dependency(self.scripts.deployment)
            if self.tools:
                config.node.add_dependency(self.tools.deployment)
        self.jupyter_lab_arn = self.jupyter_lab.attr_studio_lifecycle_config_arn
        self.code_editor_arn = self.code_editor.attr_studio_lifecycle_config_arn
