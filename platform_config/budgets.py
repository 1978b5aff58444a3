"""`cluster.budget:` AWS Budgets for the cluster and, through departments' `monthly_budget_usd`, per department;
with the cost allocation tag that names a department, and the rules on thresholds and recipients."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import Field, StrictBool

from platform_config.fields import Email, Strict, pattern

if TYPE_CHECKING:
    from platform_config.model import PlatformConfig

# Cost allocation tag keys: letters, digits, spaces and _.:/=+-@, at most 128 characters, not starting with aws:
# (https://docs.aws.amazon.com/tag-editor/latest/userguide/tagging.html).
TagKey = Annotated[
    str,
    pattern(
        r"(?!aws:)[\w .:/=+@-]{1,128}",
        "a tag key: at most 128 letters, digits, spaces and _.:/=+-@, not starting with aws:",
    ),
]
# Budgets allows up to 5 notifications per budget (https://docs.aws.amazon.com/cost-management/latest/userguide/
# budgets-managing-costs.html, "You can set up to five notifications for each budget") and 10 e-mail subscribers each.
MAX_BUDGET_NOTIFICATIONS = 5


class ClusterBudget(Strict):
    """AWS Budgets for the cluster (everything tagged hyperpod-platform=<name>) and, through departments'
    monthly_budget_usd, per department. Alerts at thresholds (percent of the limit, actual spend) go to the
    platform's alarm topic (observability.subscriptions) and to `emails`."""

    monthly_limit_usd: int = Field(ge=1, le=100_000_000, description="The cluster's monthly cost budget, USD.")
    thresholds_percent: list[int] = Field(
        default=[80, 100],
        min_length=1,
        max_length=MAX_BUDGET_NOTIFICATIONS,
        description="One alert per threshold, percent of the limit (1-1000) on actual spend; AWS Budgets allows 5 "
        "notifications per budget.",
    )
    emails: list[Email] = Field(default=[], max_length=10, description="E-mail recipients of the alerts (at most 10).")
    notify_topic: StrictBool = Field(
        True,
        description="Alerts also go to the platform's alarm topic. A budget with neither topic nor e-mail is refused.",
    )
    department_tag_key: TagKey = Field(
        "department",
        description="The cost allocation tag that names a department on department-owned resources "
        "(each user's Studio profile carries it); department budgets filter on it.",
    )


def department_tags(cfg: PlatformConfig) -> dict[str, tuple[str, str]]:
    """user -> (tag key, department) for the cost allocation tag on what is theirs (their Studio profile, whose tags
    the domain propagates to their spaces and apps): the first department listing them, their default account.
    Empty without cluster.budget."""
    if cfg.cluster.budget is None:
        return {}
    key = cfg.cluster.budget.department_tag_key
    tags: dict[str, tuple[str, str]] = {}
    for d in cfg.cluster.accounting.departments:
        for user in d.users:
            tags.setdefault(user, (key, d.name))
    return tags


def budget_errors(cfg: PlatformConfig) -> list[str]:
    budget = cfg.cluster.budget
    errors: list[str] = []
    add = errors.append
    departments = cfg.cluster.accounting.departments
    if budget is None:
        for i, d in enumerate(departments):
            if d.monthly_budget_usd is not None:
                add(
                    f"cluster.accounting.departments[{i}].monthly_budget_usd: {d.monthly_budget_usd} without "
                    "cluster.budget; department budgets take their thresholds and recipients from cluster.budget: "
                    "add it (monthly_limit_usd, thresholds_percent, emails)"
                )
        return errors
    path = "cluster.budget"
    for i, t in enumerate(budget.thresholds_percent):
        if not 1 <= t <= 1000:
            add(f"{path}.thresholds_percent[{i}]: {t}; allowed: 1-1000 (percent of the monthly limit)")
    if not budget.notify_topic and not budget.emails:
        add(
            f"{path}: notify_topic: false and no emails; a budget alert needs a recipient: set notify_topic: true "
            "(the platform's alarm topic) or list emails"
        )
    for i, d in enumerate(departments):
        if d.budget_emails and d.monthly_budget_usd is None:
            add(
                f"cluster.accounting.departments[{i}].budget_emails: {list(d.budget_emails)} without "
                "monthly_budget_usd; set the department's monthly budget or remove its budget_emails"
            )
        recipients = len(set(budget.emails) | set(d.budget_emails))
        if d.monthly_budget_usd is not None and recipients > 10:
            add(
                f"cluster.accounting.departments[{i}].budget_emails: with cluster.budget.emails that is {recipients} "
                "addresses; AWS Budgets allows at most 10 e-mail subscribers per notification"
            )
    return errors
