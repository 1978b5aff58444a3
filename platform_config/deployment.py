"""`deployment:` the account and region the stacks deploy to."""
from __future__ import annotations

from typing import Annotated, Optional

from pydantic import Field

from platform_config.fields import Strict, pattern


class Deployment(Strict):
    """Where the stacks deploy."""
    account: Optional[Annotated[str, pattern(r"\d{12}", "a 12-digit AWS account ID")]] = Field(
        None, description="The account; unset: your credentials' account at deploy time.")
    region: Optional[Annotated[str, pattern(r"[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\d", "a region such as us-west-2")]] = \
        Field("us-west-2", description="The region; AZ IDs must belong to it (us-west-2: usw2-...). null makes the "
                                       "stacks region-agnostic.")
