"""The `cicd_bot` section of config.yaml and the `users` list → one frozen BotSettings; env name sanitizing."""

from __future__ import annotations

import hashlib
import re
from dataclasses import MISSING, dataclass, fields
from enum import StrEnum
from typing import Any, Callable, Iterable

from bot.diff.gates import Gates, parse_gates
from bot.diff.plan_regressions import parse_level
from bot.errors import ConfigError
from bot.plan.impact import Exposure
from bot.project.config import UserConfig, documented
from bot.project.warn import project_warning

MAX_ENV_NAME = 63
REQUIRED_APPROVER = "required_approver"


class DeployOn(StrEnum):
    MERGE = "merge"      # a push to a prod branch
    TAG = "tag"          # a release or a tag push
    BOTH = "both"        # three tiers: merges to one environment, tags to another


class MergeMethod(StrEnum):
    MERGE = "merge"
    SQUASH = "squash"
    REBASE = "rebase"


class FullScope(StrEnum):
    WHOLE = "whole"      # the data diff compares the whole query of a model that is not incremental by time
    SKIP = "skip"        # it leaves such models out


@dataclass(frozen=True, kw_only=True)
class BotSettings:
    """Every knob of the bot; parsed once, passed everywhere, no token inside."""

    enable_deploy_command: bool = documented(
        False, "`/deploy` in a PR comment: needs write access, the required approvals, an open, mergeable PR "
               "from this repository (not a fork) whose head the prod preview was built from; `/help` lists "
               "the commands. Replies are posted on the PR.")
    command_namespace: str | None = documented(None, "Commands in PR comments start `/<namespace>/` (`/meshbot/deploy`) instead of `/`.")
    pr_environment_name: str | None = documented(
        None, "Prefix of PR environments, `<prefix>_<pr number>`.", shown="the repository name")
    default_pr_start: str | None = documented(None, "Backfill PR environments from this start (with "
                                                    "`skip_pr_backfill: false`).")
    skip_pr_backfill: bool = documented(True, "PR environments get views over empty tables (no backfill) unless "
                                              "a start is given.")
    pr_include_unmodified: bool = documented(False, "PR environments get a view for every model, not only the "
                                                    "changed ones (SQLMesh's name).")
    deploy_on: DeployOn = documented(DeployOn.MERGE, "What deploys: `merge` (a push to a prod branch), `tag` (a release or "
                                         "tag push) or `both` (three tiers).", shape="text")
    merge_environment: str = documented("prod", "The environment a merge deploys (`staging` for three tiers).")
    tag_environment: str = documented("prod", "The environment a release or tag deploys.")
    prod_branch_names: tuple[str, ...] = documented(
        (), "Branches whose pushes deploy (SQLMesh's `prod_branch_name` too).", shown="the default branch")
    require_approved_plan: bool = documented(False, "Refuse a deploy whose plan differs from the approved prod "
                                                    "preview.")
    min_approvals: int = documented(1, "How many required approvers must approve the head commit.")
    required_approvers: tuple[str, ...] = documented(
        (), "GitHub logins who must approve the head commit; `users:` with role `required_approver` add to them.")
    required_teams: tuple[str, ...] = documented(
        (), "Teams whose members may approve: `org/team-slug`, or `team-slug` of the repository owner's "
            "organization (`required_approver_teams` too).")
    gateway: str | None = documented(None, "The gateway the bot uses; it also suffixes check names. The "
                                           "action's `gateway` input wins.", shown="`default_gateway`")
    exposures: tuple[Exposure, ...] = documented(
        (), "Dashboards and other consumers outside the project (`name`, `owner`, `url`, `depends_on: "
            "[models]`); the PR comment's column impact names those a change reaches.")
    bot_login: str = documented("github-actions[bot]", "The login whose comment the bot edits.")
    run_table_diff: bool = documented(True, "Diff the data of changed models against prod on every PR.")
    table_diff_samples: bool = documented(False, "Show raw sample rows in the data diff (off: counts and "
                                                 "match rates only).")
    allow_ephemeral_state: bool = documented(False, "Accept state and a catalog that vanish with the CI runner "
                                                    "(SQLite, embedded Derby): for throwaway demos.")
    merge_method: MergeMethod | None = documented(None, "`merge`, `squash` or `rebase`: merge the PR after a successful "
                                                "`/deploy` (pinned to the deployed head).", shape="text")
    table_diff_window_days: int = documented(7, "The data diff of INCREMENTAL_BY_TIME_RANGE models covers the "
                                                "last N days of intervals.")
    table_diff_full_scope: FullScope = documented(FullScope.WHOLE, "Other kinds in the data diff: `whole` compares the whole "
                                                     "query, `skip` leaves them out.", shape="text")
    table_diff_gates: Gates = documented(
        Gates(), "Thresholds of the `meshbot - Data Diff` check: `duplicate_keys`, `changed_rows_pct`, "
                 "`null_share_increase`, `row_count_change_pct`, each `off`, `warn`, `fail`, a number (fail "
                 "above it) or `{above: N, level: warn|fail}`; per model under `models:`.",
        shown="`duplicate_keys: fail`")
    plan_regressions: str = documented("warn", "Spark plan regressions of the directly modified models against "
                                               "prod (lost partition pruning, a new nested loop join, more "
                                               "shuffles): `warn`, `fail` (fails the Data Diff check) or `off`.")
    run_on_deploy: bool = documented(False, "After a prod deploy, run what each model's cron made due "
                                            "(SQLMesh's `run_on_deploy_to_prod`).")
    max_backfill_batches: int | None = documented(
        None, "A deploy whose plan computes more batches is refused with the count per model, unless a "
              "required approver comments `/deploy --allow-large-backfill`.")
    max_backfill_intervals: int | None = documented(
        None, "The same guard counted in intervals, whatever the `batch_size` (six years of a daily model: 2191).")
    max_backfill_executor_hours: float | None = documented(
        None, "The same guard on the plan's estimated executor time (Spark task time summed over all tasks), in "
              "hours, from the task time recorded with earlier batches; the refusal names each model's estimate.")
    forward_only_branch_suffix: str = documented(
        "-forward-only", "A PR from a branch ending so makes forward-only plans (its environment, the prod "
                         "preview and its deploy).")
    invalidate_environment_after_deploy: bool = documented(
        True, "Remove a merged PR's environment after the deploy (SQLMesh's name; false keeps it).")
    check_if_blocked_on_deploy_to_prod: bool = documented(
        True, "`/deploy` refuses a PR that branch protection blocks (SQLMesh's name).")

    @property
    def has_required_approvers(self) -> bool:
        return bool(self.required_approvers or self.required_teams)

    def check_name(self, name: str) -> str:
        """`meshbot - Unit Tests`, or `meshbot - Unit Tests (gateway)` when a gateway is configured."""
        return f"meshbot - {name}" + (f" ({self.gateway})" if self.gateway else "")

    def is_prod_branch(self, branch: str | None, default_branch: str) -> bool:
        names = self.prod_branch_names or (default_branch,)
        return branch is not None and branch in names

    def forward_only(self, head_ref: str | None) -> bool:
        """SQLMesh's forward_only_branch_suffix: a PR from such a branch makes forward-only plans.

        >>> BotSettings().forward_only("fix-forward-only"), BotSettings().forward_only("main")
        (True, False)
        """
        return bool(head_ref and self.forward_only_branch_suffix and head_ref.endswith(self.forward_only_branch_suffix))

    def deploys_on(self, trigger: DeployOn) -> bool:
        return self.deploy_on in (trigger, DeployOn.BOTH)


def load_settings(cicd_bot: dict[str, Any] | None, users: Iterable[UserConfig] = (), *,
                  gateway: str | None = None, where: str = "config.yaml") -> BotSettings:
    """Parse `cicd_bot:` (and `users:` with role required_approver) into BotSettings, each key by its parser
    (PARSERS); a key left out takes the field's default."""
    raw = _from_sqlmesh(dict(cicd_bot or {}), where)
    teams = raw.pop("required_approver_teams", None)       # SQLMesh's name; required_teams wins
    if teams is not None and not raw.get("required_teams"):
        raw["required_teams"] = teams
    unknown = sorted(set(raw) - set(PARSERS))
    if unknown:
        raise ConfigError(f"unknown cicd_bot setting(s): {', '.join(unknown)}", path=where)
    values = {f.name: PARSERS[f.name](raw[f.name], f.name, where) if f.name in raw else _default(f)
              for f in fields(BotSettings)}
    users_approving = sorted({u.github_username for u in users if u.github_username and REQUIRED_APPROVER in u.roles})
    values["required_approvers"] = tuple(dict.fromkeys((*users_approving, *values["required_approvers"])))
    values["gateway"] = gateway or values["gateway"]
    return BotSettings(**values)


def _default(field: Any) -> Any:
    return field.default_factory() if field.default is MISSING else field.default


Parser = Callable[[Any, str, str], Any]     # (the value in config.yaml, its key, the file) -> the field's value


def _choice(kind: type[StrEnum], *, optional: bool = False) -> Parser:
    """One of `kind`'s values, in any case; with `optional`, also nothing (None)."""
    def parse(value: Any, key: str, where: str) -> StrEnum | None:
        if optional and _opt_str(value) is None:
            return None
        text = str(value) if optional else str(value).lower()
        if text.lower() not in set(kind):
            raise ConfigError(f"cicd_bot.{key} must be one of {', '.join(kind)} (got `{text}`)", path=where)
        return kind(text.lower())
    return parse


def _text_or(default: str) -> Parser:
    """A name; empty means the default."""
    return lambda value, key, where: str(value or default)


def _optional_text(value: Any, key: str, where: str) -> str | None:
    return _opt_str(value)


def _names(value: Any, key: str, where: str) -> tuple[str, ...]:
    return tuple(_str_list(value, key, where))


def _min_approvals(value: Any, key: str, where: str) -> int:
    try:
        count = int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"cicd_bot.{key} must be an integer", path=where) from None
    if count < 1:
        raise ConfigError(f"cicd_bot.{key} must be at least 1", path=where)
    return count


def _days(value: Any, key: str, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).isdigit() or int(value) < 1:
        raise ConfigError(f"cicd_bot.{key} must be a whole number of days, at least 1 (got `{value}`)", path=where)
    return int(value)


def _whole(value: Any, key: str, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not str(value).isdigit():
        raise ConfigError(f"cicd_bot.{key} must be a whole number (got `{value}`)", path=where)
    return int(value)


def _number(value: Any, key: str, where: str) -> float | None:
    """A number at least 0 (`1.5`, `"2"`), or None when not set."""
    if value is None:
        return None
    try:
        number = float(value) if not isinstance(value, bool) else -1.0
    except (TypeError, ValueError):
        number = -1.0
    if not number >= 0 or number == float("inf"):
        raise ConfigError(f"cicd_bot.{key} must be a number, at least 0 (got `{value}`)", path=where)
    return number


def _bool(value: Any, key: str, where: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
        return value.lower() in ("true", "yes", "1")
    raise ConfigError(f"cicd_bot.{key} must be true or false (got `{value}`)", path=where)


def _exposures(value: Any, key: str, where: str) -> tuple[Exposure, ...]:
    """`exposures:` — a list of {name, owner, url, depends_on: [models]}: who reads the models outside the project."""
    if value is None:
        return ()
    if not isinstance(value, (list, tuple)):
        raise ConfigError("cicd_bot.exposures must be a list of {name, owner, url, depends_on}", path=where)
    found = []
    for item in value:
        if not isinstance(item, dict) or not _opt_str(item.get("name")):
            raise ConfigError("each cicd_bot.exposures entry must be a mapping with a `name`", path=where)
        unknown = sorted(set(item) - {"name", "owner", "url", "depends_on"})
        if unknown:
            raise ConfigError(f"cicd_bot.exposures `{item['name']}`: unknown key(s) {', '.join(unknown)}", path=where)
        models = _str_list(item.get("depends_on"), f"exposures.{item['name']}.depends_on", where)
        found.append(Exposure(name=str(item["name"]), owner=_opt_str(item.get("owner")),
                              url=_opt_str(item.get("url")), depends_on=tuple(m.lower() for m in models)))
    return tuple(found)


# Each BotSettings field's parser (tests/test_github_settings.py checks that every field has one).
PARSERS: dict[str, Parser] = {
    "enable_deploy_command": _bool, "command_namespace": _optional_text, "pr_environment_name": _optional_text,
    "default_pr_start": _optional_text, "skip_pr_backfill": _bool, "pr_include_unmodified": _bool,
    "deploy_on": _choice(DeployOn), "merge_environment": _text_or("prod"), "tag_environment": _text_or("prod"),
    "prod_branch_names": _names, "require_approved_plan": _bool, "min_approvals": _min_approvals,
    "required_approvers": _names, "required_teams": _names, "gateway": _optional_text, "exposures": _exposures,
    "bot_login": _text_or("github-actions[bot]"), "run_table_diff": _bool, "table_diff_samples": _bool,
    "allow_ephemeral_state": _bool, "merge_method": _choice(MergeMethod, optional=True), "table_diff_window_days": _days,
    "table_diff_full_scope": _choice(FullScope),
    "table_diff_gates": lambda value, key, where: parse_gates(value, where=where),
    "plan_regressions": lambda value, key, where: parse_level(value, where=where),
    "run_on_deploy": _bool, "max_backfill_batches": _whole, "max_backfill_intervals": _whole,
    "max_backfill_executor_hours": _number, "forward_only_branch_suffix": _text_or("-forward-only"),
    "invalidate_environment_after_deploy": _bool, "check_if_blocked_on_deploy_to_prod": _bool,
}


def pr_environment_name(prefix: str, number: int) -> str:
    """`<prefix>_<number>`: lowercase, only [a-z0-9_], at most 63 chars (hash suffix when cut).

    >>> pr_environment_name("My-Repo.Name", 12)
    'my_repo_name_12'
    >>> len(pr_environment_name("x" * 100, 7)), pr_environment_name("x" * 100, 7).endswith("_7")
    (63, True)
    >>> pr_environment_name("'; DROP TABLE x; --", 3)
    'drop_table_x_3'
    """
    base = re.sub(r"[^a-z0-9_]+", "_", prefix.lower())
    base = re.sub(r"_+", "_", base).strip("_") or "pr"
    full = f"{base}_{int(number)}"
    if len(full) <= MAX_ENV_NAME:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:8]
    suffix = f"_{digest}_{int(number)}"
    return base[:MAX_ENV_NAME - len(suffix)].rstrip("_") + suffix


# SQLMesh's GitHub bot settings meshbot reads under another name, and those it takes as given because it
# always behaves so (it categorizes every change automatically; PR environments hold the changed models).
SQLMESH_ALIASES = {"prod_branch_name": "prod_branch_names", "run_on_deploy_to_prod": "run_on_deploy"}
SQLMESH_ACCEPTED = ("auto_categorize_changes", "default_pr_preview_start", "pr_preview_min_intervals",
                    "pr_min_intervals")


def _from_sqlmesh(raw: dict[str, Any], where: str) -> dict[str, Any]:
    """A SQLMesh `cicd_bot:` block as meshbot's: `type` must be github, aliases renamed, the settings meshbot
    has no use for dropped with a warning naming them.

    >>> _from_sqlmesh({"type": "github", "prod_branch_name": "main", "run_on_deploy_to_prod": True}, "c.yaml")
    {'prod_branch_names': 'main', 'run_on_deploy': True}
    """
    out = dict(raw)
    kind = str(out.pop("type", "github")).lower()
    if kind != "github":
        raise ConfigError(f"cicd_bot.type `{kind}` is not supported: meshbot is a GitHub bot (type: github)",
                          path=where)
    for alias, name in SQLMESH_ALIASES.items():
        if alias in out:
            if name in out and out[name] != out[alias]:
                raise ConfigError(f"cicd_bot sets both `{alias}` (SQLMesh's name) and `{name}`; keep one", path=where)
            out[name] = out.pop(alias)
    ignored = [key for key in SQLMESH_ACCEPTED if out.pop(key, None) is not None]
    if ignored:
        project_warning(f"cicd_bot: {', '.join(ignored)} (SQLMesh bot settings) change nothing in meshbot, "
                        "which categorizes every change automatically and previews the changed models", path=where)
    return out








def _opt_str(value: Any) -> str | None:
    return str(value) if value not in (None, "") else None


def _str_list(value: Any, key: str, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, (list, tuple)):
        raise ConfigError(f"cicd_bot.{key} must be a list of names", path=where)
    return [str(v) for v in value]
