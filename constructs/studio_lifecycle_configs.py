"""Studio lifecycle configs (JupyterLab and Code Editor) that make a space a Slurm login node."""
from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

STUDIO_SCRIPTS_DIR = Path(__file__).resolve().parent.parent / "lifecycle" / "studio"
SLURM_LOGIN_SCRIPT = STUDIO_SCRIPTS_DIR / "slurm_login_node.sh"
MAX_CONTENT_CHARS = 16384  # StudioLifecycleConfigContent limit, after base64


class StudioLifecycleConfigs(Construct):
    def __init__(self, scope: Construct, id_: str, *, name: str, slurm_login_secret_arn: str) -> None:
        super().__init__(scope, id_)
        body = SLURM_LOGIN_SCRIPT.read_text()
        shebang, _, rest = body.partition("\n")
        if len(body) * 4 // 3 + 400 > MAX_CONTENT_CHARS:
            raise ValueError(f"{SLURM_LOGIN_SCRIPT} is too long for a Studio lifecycle config ({MAX_CONTENT_CHARS} "
                             "base64 characters)")
        # The secret's ARN and the region are known only at deploy time: prepend them as exports.
        content = cdk.Fn.base64(cdk.Fn.join("", [
            f"{shebang}\n", "export SLURM_LOGIN_SECRET_ARN='", slurm_login_secret_arn, "'\n",
            "export AWS_DEFAULT_REGION='", cdk.Aws.REGION, "'\n", rest]))
        self.jupyter_lab = sagemaker.CfnStudioLifecycleConfig(
            self, "JupyterLab", studio_lifecycle_config_name=f"{name}-slurm-login-jupyterlab",
            studio_lifecycle_config_app_type="JupyterLab", studio_lifecycle_config_content=content)
        self.code_editor = sagemaker.CfnStudioLifecycleConfig(
            self, "CodeEditor", studio_lifecycle_config_name=f"{name}-slurm-login-codeeditor",
            studio_lifecycle_config_app_type="CodeEditor", studio_lifecycle_config_content=content)
        self.jupyter_lab_arn = self.jupyter_lab.attr_studio_lifecycle_config_arn
        self.code_editor_arn = self.code_editor.attr_studio_lifecycle_config_arn
