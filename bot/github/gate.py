"""What a GitHub event asks the bot to do, and whether it may: decided from the payload, the trusted
settings and the GitHub API alone, before any project file is read (the project stays sealed until then)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable

from bot.errors import GithubError
from bot.github.api import WRITE_PERMISSIONS, GithubPort
from bot.github.approvals import ApprovalStatus, evaluate
from bot.github.commands import Command, Reply, ReplyKind, command_prefix, parse_comment
from bot.github.event import Event, PullRequest
from bot.github.settings import BotSettings
from bot.report.comment_state import comment_marker, recorded_checks, recorded_plan_digest


ALLOW_LARGE_BACKFILL = "--allow-large-backfill"
ALLOW_DRIFT = "--allow-drift"                        # a deploy may undo prod's drift (bot.plan.drift)
ALLOW_DESTRUCTIVE = "--allow-destructive-model"      # followed by a model name; given as --allow-destructive-model=M


def deploy_options(args: tuple[str, ...]) -> tuple[tuple[str, ...], list[str]]:
    """A `/deploy` comment's words → (options, words it does not know). Both options are for required
    approvers only.

    >>> deploy_options(("--allow-destructive-model", "shop.orders", "--allow-large-backfill"))
    (('--allow-destructive-model=shop.orders', '--allow-large-backfill'), [])
    >>> deploy_options(("--allow-destructive-model",))
    ((), ['--allow-destructive-model (needs a model name)'])
    """
    options: list[str] = []
    unknown: list[str] = []
    words = iter(args)
    for word in words:
        if word in (ALLOW_LARGE_BACKFILL, ALLOW_DRIFT):
            options.append(word)
        elif word == ALLOW_DESTRUCTIVE or word.startswith(ALLOW_DESTRUCTIVE + "="):
            model = word.partition("=")[2] or next(words, "")
            if model and not model.startswith("--"):
                options.append(f"{ALLOW_DESTRUCTIVE}={model}")
            else:
                unknown.append(f"{ALLOW_DESTRUCTIVE} (needs a model name)")
        else:
            unknown.append(word)
    return tuple(options), unknown


def destructive_models(options: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(o.partition("=")[2] for o in options if o.startswith(ALLOW_DESTRUCTIVE + "="))


class Step(str, Enum):
    SYNC = "sync"              # a pull request was pushed: tests, PR environment, prod plan preview
    APPROVAL = "approval"      # a review: the required-approval check (no project needed)
    REPLY = "reply"            # a comment that gets an answer: help, usage, a disabled command
    DEPLOY = "deploy"          # apply prod: push to the prod branch, release or tag, `/deploy`
    CLEANUP = "cleanup"        # a pull request closed
    RUN = "run"                # a schedule or a manual dispatch: process what each model's cron made due
    ROLLBACK = "rollback"      # `/rollback`: serve the merge environment's previous plan again
    QUEUE = "queue"            # a merge queue entry: check the queue's merge commit against prod
    NOTHING = "nothing"


@dataclass(frozen=True)
class Decision:
    """The step an event asks for; `text` says why nothing happens, or is the reply."""

    step: Step
    text: str = ""
    environment: str | None = None     # DEPLOY: the environment to apply
    command: bool = False              # DEPLOY asked for by a `/deploy` comment
    options: tuple[str, ...] = ()      # the command's options, e.g. --allow-large-backfill


def classify(event: Event, settings: BotSettings) -> Decision:
    """The step `event` asks for under `settings` (pure: the payload and the trusted settings only).

    >>> from bot.github.event import Repo
    >>> classify(Event("push", None, Repo("o", "r"), ref="refs/heads/main", sha="abc"), BotSettings())
    Decision(step=<Step.DEPLOY: 'deploy'>, text='', environment='prod', command=False, options=())
    >>> classify(Event("push", None, Repo("o", "r"), ref="refs/heads/feature", sha="abc"), BotSettings()).step
    <Step.NOTHING: 'nothing'>
    """
    pr = event.pull_request
    fork = pr is not None and pr.is_from_fork(event.repo)
    if event.is_pr_closed:
        if fork:
            return Decision(Step.NOTHING, f"pull request #{pr.number} from {pr.head_origin()} was closed; meshbot "
                                          "never builds an environment for a fork, so there is nothing to clean up.")
        return Decision(Step.CLEANUP)
    if event.is_pr_sync:
        if fork:
            return Decision(Step.NOTHING, f"pull request #{pr.number} comes from {pr.head_origin()}. Workflows on "
                                          "fork PRs get no secrets and a read-only token, and meshbot never runs a "
                                          "fork's code, so it builds no environment for it; a maintainer can push "
                                          "the branch to this repository to run it.")
        return Decision(Step.SYNC)
    if event.name == "pull_request_review" and pr is not None:
        return Decision(Step.APPROVAL)
    if event.name == "issue_comment":
        return _classify_comment(event, settings)
    if event.name == "workflow_dispatch" and event.input("rollback").lower() == "true":
        return _classify_dispatched_rollback(event, settings)
    if event.name in ("schedule", "workflow_dispatch"):
        return Decision(Step.RUN)
    if event.name == "merge_group":
        return _classify_merge_group(event, settings)
    if event.name == "push" and event.deleted:
        return Decision(Step.NOTHING, f"`{event.ref}` was deleted; nothing to deploy.")
    if event.name == "push" and event.tag is None and settings.deploys_on("merge") \
            and settings.is_prod_branch(event.branch, event.repo.default_branch):
        return Decision(Step.DEPLOY, environment=settings.merge_environment)
    if ((event.name == "push" and event.tag) or (event.name == "release" and event.action == "published")) \
            and settings.deploys_on("tag"):
        return Decision(Step.DEPLOY, environment=settings.tag_environment)
    return Decision(Step.NOTHING, f"nothing to do for `{event.name}` ({event.action or 'no action'}).")


def _classify_comment(event: Event, settings: BotSettings) -> Decision:
    comment = event.comment
    if event.action != "created" or comment is None or not comment.on_pull_request:
        return Decision(Step.NOTHING, "a comment that is not a new comment on a pull request.")
    if comment.user == settings.bot_login:
        return Decision(Step.NOTHING, "meshbot's own comment.")
    parsed = parse_comment(comment.body, namespace=settings.command_namespace,
                           enabled=settings.enable_deploy_command)
    if isinstance(parsed, Reply):
        return Decision(Step.REPLY, parsed.text)
    if isinstance(parsed, Command) and parsed.name == "rollback":
        return _classify_rollback(parsed, settings)
    if isinstance(parsed, Command):
        options, unknown = deploy_options(parsed.args)
        if unknown:
            return Decision(Step.REPLY, Reply(ReplyKind.UNKNOWN_OPTIONS, command_prefix(settings.command_namespace),
                                              "deploy", unknown=tuple(unknown),
                                              options=(ALLOW_LARGE_BACKFILL, ALLOW_DRIFT,
                                                       f"{ALLOW_DESTRUCTIVE} MODEL")).text)
        return Decision(Step.DEPLOY, environment=settings.merge_environment, command=True, options=options)
    return Decision(Step.NOTHING, f"the comment is {parsed.reason}.")


def _classify_merge_group(event: Event, settings: BotSettings) -> Decision:
    """A merge queue entry asks for its checks (`checks_requested`) when it targets a prod branch; the queue
    branch must name the entry's pull request (`gh-readonly-queue/<base>/pr-<N>-<sha>`).

    >>> from bot.github.event import MergeGroup, Repo
    >>> group = MergeGroup("f" * 40, "refs/heads/gh-readonly-queue/main/pr-7-" + "a" * 40, "refs/heads/main")
    >>> classify(Event("merge_group", "checks_requested", Repo("o", "r"), merge_group=group), BotSettings())
    Decision(step=<Step.QUEUE: 'queue'>, text='', environment='prod', command=False, options=())
    """
    group = event.merge_group
    if event.action != "checks_requested" or group is None:
        return Decision(Step.NOTHING, f"the merge queue entry was {event.action or 'changed'}; no checks are asked for.")
    if not group.pr_numbers:
        return Decision(Step.NOTHING, f"`{group.head_ref}` is not a merge queue branch "
                                      "(gh-readonly-queue/<base>/pr-<number>-<sha>); meshbot checks queue entries only.")
    if not settings.is_prod_branch(group.base_branch, event.repo.default_branch):
        return Decision(Step.NOTHING, f"the merge queue of `{group.base_branch}`, which meshbot does not deploy; "
                                      "it checks the queues of prod branches only.")
    return Decision(Step.QUEUE, environment=settings.merge_environment)


def _classify_rollback(parsed: Command, settings: BotSettings) -> Decision:
    """`/rollback [PLAN_ID]`: the plan id (hex, a prefix will do) travels as the option `--to=PLAN_ID`."""
    args = parsed.args
    if len(args) > 1 or (args and not all(c in "0123456789abcdef" for c in args[0].lower())):
        return Decision(Step.REPLY, Reply(ReplyKind.BAD_ROLLBACK_ARGS, command_prefix(settings.command_namespace),
                                          "rollback", environment=settings.merge_environment).text)
    return Decision(Step.ROLLBACK, environment=settings.merge_environment, command=True,
                    options=tuple(f"--to={a.lower()}" for a in args))


def _classify_dispatched_rollback(event: Event, settings: BotSettings) -> Decision:
    """The deploy workflow's `workflow_dispatch` with `rollback: true` and an optional `rollback_to` plan id."""
    target = event.input("rollback_to").strip().lower()
    if target and not all(c in "0123456789abcdef" for c in target):
        return Decision(Step.NOTHING, f"rollback refused: the input `rollback_to` must be a plan id (hex, as "
                                      f"`meshbot environments {settings.merge_environment} --history` lists "
                                      f"them), not `{target}`.")
    return Decision(Step.ROLLBACK, environment=settings.merge_environment,
                    options=(f"--to={target}",) if target else ())


def rollback_target(options: tuple[str, ...]) -> str | None:
    return next((o.partition("=")[2] for o in options if o.startswith("--to=")), None)


def authorize_rollback(event: Event, settings: BotSettings, github: GithubPort) -> Verdict:
    """May the `/rollback` of this comment roll back now? Write permission, a pull request of this
    repository (not a fork), and a required approver as commenter. Reads the GitHub API only."""
    comment = event.comment
    prefix = command_prefix(settings.command_namespace)
    refused = _writer_refusal(github, comment.user, f"{prefix}rollback")
    if refused is not None:
        return refused
    pr = github.pull_request(comment.issue_number)
    if pr.is_from_fork(event.repo):
        return Verdict(pr, f"rollback refused: #{pr.number} comes from {pr.head_origin()}; meshbot takes "
                           "commands that touch prod only on pull requests of this repository.")
    if not _is_required_approver(github, settings, event, comment.user):
        return Verdict(pr, f"rollback refused: `{prefix}rollback` can be given by a required approver only.")
    return Verdict(pr, None)


def authorize_dispatched_rollback(event: Event, settings: BotSettings, github: GithubPort) -> str | None:
    """May the user who dispatched the deploy workflow with `rollback: true` roll back? The same people as
    `/rollback`: write permission and a required approver. The refusal, or None."""
    user = event.sender or ""
    refused = _writer_refusal(github, user, "rollback")
    if refused is not None:
        return refused.refusal
    if not _is_required_approver(github, settings, event, user):
        return f"rollback refused: @{user} dispatched it, but a rollback can be started by a required approver only."
    return None


@dataclass(frozen=True)
class Verdict:
    """Whether a deploy may go ahead; `refusal` is the reason when not (a reply to a command)."""

    pull_request: PullRequest | None
    refusal: str | None = None
    approval: ApprovalStatus | None = None


def authorize_command(event: Event, settings: BotSettings, github: GithubPort, *,
                      checkout_head: str | None, check_head: bool,
                      commits_behind: Callable[[str, str], int | None], options: tuple[str, ...] = ()) -> Verdict:
    """May the `/deploy` of this comment deploy now? The commenter, the pull request (origin, state,
    mergeability, the head the preview was built for), its approvals and, with `check_head`, the
    checkout (it must be exactly the PR's head). Reads the GitHub API only."""
    comment = event.comment
    prefix = command_prefix(settings.command_namespace)
    refused = _writer_refusal(github, comment.user, f"{prefix}deploy")
    if refused is not None:
        return refused
    pr = github.pull_request(comment.issue_number)
    refusal = _pull_request_refusal(event, pr, github, settings, prefix) or _behind_refusal(pr, commits_behind)
    if refusal is not None:
        return Verdict(pr, refusal)
    if check_head:
        refusal = checkout_refusal(pr.head_sha, checkout_head, f"the head of #{pr.number}")
        if refusal is not None:
            return Verdict(pr, refusal + " (the `sha` output of the authorize job).")
    given = [o.partition("=")[0] for o in options]
    if given and not _is_required_approver(github, settings, event, comment.user):
        names = ", ".join(f"`{o}`" for o in dict.fromkeys(given))
        return Verdict(pr, f"deploy refused: {names} can be given by a required approver only.")
    approval = approval_status(github, settings, event.repo.owner, pr)
    if not approval.approved:
        return Verdict(pr, f"deploy refused: required approval is missing. {approval.summary}", approval)
    return Verdict(pr, None, approval)


def authorize_merge_group(event: Event, settings: BotSettings, github: GithubPort, *,
                          checkout_head: str | None) -> Verdict:
    """May meshbot check this merge queue entry? GitHub sends `merge_group` only for a pull request that met
    the branch's rules (its approvals among them) when it was queued; meshbot still asks the API for the PR
    the queue branch names: from this repository (never a fork's code), open, into the queue's base; the
    checkout must be exactly the queue's merge commit. Approvals are the PR's, on the PR's head commit."""
    group = event.merge_group
    pr = github.pull_request(group.pr_numbers[0])
    if pr.is_from_fork(event.repo):
        return Verdict(pr, f"#{pr.number} comes from {pr.head_origin()}; meshbot never runs a fork's code with "
                           "this repository's credentials, so it does not check its merge queue entry. A maintainer "
                           "can push the branch to this repository and queue that pull request instead.")
    if pr.state != "open" or pr.merged:
        return Verdict(pr, f"#{pr.number} is {'merged' if pr.merged else 'closed'}; its merge queue entry is stale.")
    if pr.base_ref != group.base_branch:
        return Verdict(pr, f"#{pr.number} targets `{pr.base_ref}`, but the merge queue entry is for "
                           f"`{group.base_branch}`.")
    refusal = checkout_refusal(group.head_sha, checkout_head, "the merge queue's commit (merge_group.head_sha)")
    if refusal is not None:
        return Verdict(pr, refusal.replace("deploy refused", "merge queue check refused", 1))
    return Verdict(pr, None)


def _writer_refusal(github: GithubPort, login: str, command: str) -> "Verdict | None":
    """A command that touches prod needs write permission on the repository (asked of the API)."""
    permission = github.permission(login)
    if permission in WRITE_PERMISSIONS:
        return None
    return Verdict(None, f"ignored `{command}`: it needs write permission on this repository "
                         f"(yours is `{permission}`).")


def _pull_request_refusal(event: Event, pr: PullRequest, github: GithubPort, settings: BotSettings,
                          prefix: str) -> str | None:
    if pr.state != "open" or pr.merged:
        return f"#{pr.number} is {'merged' if pr.merged else 'closed'}; `{prefix}deploy` deploys open pull requests only."
    if pr.is_from_fork(event.repo):
        return (f"deploy refused: #{pr.number} comes from {pr.head_origin()}. meshbot never runs a fork's code "
                "with this repository's write token and prod credentials; a maintainer can push the branch "
                "to this repository and deploy from there.")
    if pr.mergeable_state == "draft" or pr.draft:
        return f"deploy refused: #{pr.number} is a draft; mark it ready for review first."
    if pr.mergeable is None:
        return (f"deploy refused for now: GitHub is still computing whether #{pr.number} can be merged. "
                f"Try `{prefix}deploy` again in a minute.")
    if pr.mergeable is False or pr.mergeable_state == "dirty":
        return (f"deploy refused: #{pr.number} has merge conflicts with `{pr.base_ref}`; resolve them so that "
                "what is deployed is what will be merged.")
    if pr.mergeable_state == "blocked" and settings.check_if_blocked_on_deploy_to_prod:
        return (f"deploy refused: branch protection blocks merging #{pr.number} (required reviews or status "
                "checks are missing; cicd_bot.check_if_blocked_on_deploy_to_prod: false deploys anyway).")
    found = github.find_comment(pr.number, marker=comment_marker(settings.gateway))
    body = found[1] if found else None
    recorded, _ = recorded_checks(body)
    if recorded and recorded != pr.head_sha:
        return (f"deploy refused: the prod plan preview was built for {recorded[:7]}, but the head of #{pr.number} "
                f"is now {pr.head_sha[:7]}; wait for meshbot to finish on the new commit, then `{prefix}deploy` again.")
    if recorded is None or recorded_plan_digest(body) is None:
        where = f" for gateway `{settings.gateway}`" if settings.gateway else ""
        return (f"deploy refused: #{pr.number} has no prod plan preview{where} for its head {pr.head_sha[:7]} yet; "
                f"wait for meshbot to finish on it (its workflow must use the same gateway as this one), then "
                f"`{prefix}deploy` again.")
    return None


def _behind_refusal(pr: PullRequest, commits_behind: Callable[[str, str], int | None]) -> str | None:
    """`/deploy` deploys the PR's head: it must contain its base, or prod would lose what was merged since."""
    behind = commits_behind(pr.base_ref, pr.head_sha)
    if behind == 0:
        return None
    if behind is None:
        return (f"deploy refused: meshbot could not tell whether #{pr.number} contains `{pr.base_ref}`, and "
                "deploys a head only when it does.")
    return (f"deploy refused: #{pr.number} is {behind} commit(s) behind `{pr.base_ref}`; update the branch so that "
            "the commit deployed holds everything already on the base (and is what will be merged).")


def _is_required_approver(github: GithubPort, settings: BotSettings, event: Event, login: str) -> bool:
    if login.lower() in {u.lower() for u in settings.required_approvers}:
        return True
    for team in settings.required_teams:
        org, _, slug = team.rpartition("/")
        if github.is_team_member(org or event.repo.owner, slug, login):
            return True
    return False


def approval_status(github: GithubPort, settings: BotSettings, owner: str, pr: PullRequest) -> ApprovalStatus:
    """The required-approval verdict of `pr` under the trusted settings, from its reviews and team memberships."""
    if not settings.has_required_approvers:
        return ApprovalStatus(approved=True, required=False)
    reviews = github.list_reviews(pr.number)

    def in_team(login: str) -> bool:
        for team in settings.required_teams:
            org, _, slug = team.rpartition("/")
            if github.is_team_member(org or owner, slug, login):
                return True
        return False

    return evaluate(reviews=reviews, head_sha=pr.head_sha, author=pr.author,
                    required_users=settings.required_approvers, min_approvals=settings.min_approvals,
                    in_team=in_team if settings.required_teams else None)


def checkout_refusal(expected: str, checkout_head: str | None, what: str) -> str | None:
    """Why the job must not deploy its checkout: it is not exactly `expected`, the commit the event names.

    >>> checkout_refusal("abc1234def", "abc1234def", "the pushed commit") is None
    True
    >>> checkout_refusal("abc1234def", None, "the pushed commit")[:60]
    'deploy refused: the checked-out commit cannot be read (not a'
    """
    if checkout_head == expected:
        return None
    seen = f"is {checkout_head[:7]}" if checkout_head else "cannot be read (not a git checkout)"
    return (f"deploy refused: the checked-out commit {seen}, but {what} is {expected[:7]}; meshbot deploys "
            f"exactly that commit. Check out `{expected}`")


def release_refusal(sha: str, default_branch: str, on_default_branch: Callable[[str], bool | None], *,
                    action: str = "deploy", what: str = "the tagged commit") -> str | None:
    """Why `action` must not run on commit `sha` (`what`): it must be a commit of the default branch."""
    answer = on_default_branch(sha)
    if answer is True:
        return None
    if answer is None:
        return (f"{action} refused: meshbot could not tell whether {what} {sha[:7]} is on the default "
                f"branch `{default_branch}`, and {action}s only from commits that are.")
    return (f"{action} refused: {what} {sha[:7]} is not on the default branch `{default_branch}`; "
            f"{action} from a commit that was merged there.")


class SealedContext:
    """The project, built only after the event is authorized: any use before `unseal()` is an error, so a
    code path that would read the pull request's files (config.py, macros, models) too early fails loudly."""

    def __init__(self, factory: Callable[[bool, frozenset[str] | None], Any]) -> None:
        self._factory = factory          # factory(read_cache, fresh_files) -> the project's EngineContext
        self._context: Any = None
        self._unsealed = False
        self.read_cache = True
        self.fresh_files: frozenset[str] | None = None

    def unseal(self, *, read_cache: bool = True, fresh_files: frozenset[str] | None = None) -> None:
        """Allow the project to load; `read_cache` False: a deploy, which trusts no cache on disk;
        `fresh_files`: a pull request's own files, which it takes from no cache (load_project)."""
        self._unsealed, self.read_cache, self.fresh_files = True, read_cache, fresh_files

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if not self._unsealed:
            raise GithubError(f"meshbot tried to read the project (`{name}`) before the event was authorized; "
                              "nothing was loaded. This is a bug in meshbot: please report it.")
        if self._context is None:
            self._context = self._factory(self.read_cache, self.fresh_files)
        return getattr(self._context, name)
