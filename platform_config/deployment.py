"""`deployment:` the account and region the stacks deploy to."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from platform_config.fields import Strict, pattern


class Deployment(Strict):
    """Where the stacks deploy."""

    account: Annotated[str, pattern(r"\d{12}", "a 12-digit AWS account ID")] | None = Field(
        None, description="The account; unset: your credentials' account at deploy time."
    )
    region: Annotated[str, pattern(r"[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d", "a region such as us-west-2")] | None = (
        Field(
            "us-west-2",
            description="The region; AZ IDs must belong to it (us-west-2: usw2-...). null makes the "
            "stacks region-agnostic.",
        )
    )
