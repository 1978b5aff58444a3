"""`deployment:` the account and region the stacks deploy to."""
from __future__ import annotations

from typing import Annotated, Optional

from platform_config.fields import Strict, pattern


class Deployment(Strict):
    account: Optional[Annotated[str, pattern(r"\d{12}", "a 12-digit AWS account ID")]] = None
    region: Optional[Annotated[str, pattern(r"[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d", "a region such as us-west-2")]] = "us-west-2"
