"""What a GitHub event asks the bot to do, from the payload and the trusted settings alone (pure: no API call,
no project file)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from bot.github.commands import Command, Reply, ReplyKind, command_prefix, parse_comment
from bot.github.event import Event
from bot.github.refusals import (BadRollbackInput, CommentIgnored, DispatchRollbackOrDeploy, ForkClosed, ForkNotBuilt, NotAQueueBranch,
                                 NotANewComment, NothingForEvent, OwnComment, QueueEntryNotRequested,
                                 QueueNotDeployed, RefDeleted)
from bot.github.settings import BotSettings, DeployOn


ALLOW_LARGE_BACKFILL = "--allow-large-backfill"
ALLOW_DRIFT = "--allow-drift"                        # a deploy may undo prod's drift (bot.plan.drift)
ALLOW_DESTRUCTIVE = "--allow-destructive-model"      # followed by a model name; given as --allow-destructive-model=M


@dataclass(frozen=True)
class DeployOptions:
    """What a `/deploy` comment allows beyond a plain deploy; each is for required approvers only."""

    allow_large_backfill: bool = False           # past cicd_bot.max_backfill_*
    allow_drift: bool = False                    # undo prod's drift (bot.plan.drift)
    allow_destructive: tuple[str, ...] = ()      # models whose destructive change may apply

    @property
    def names(self) -> tuple[str, ...]:
        """The options given, as a comment writes them (each once).

        >>> DeployOptions(allow_drift=True, allow_destructive=("a", "b")).names
        ('--allow-drift', '--allow-destructive-model')
        """
        return tuple(name for name, given in ((ALLOW_LARGE_BACKFILL, self.allow_large_backfill),
                                               (ALLOW_DRIFT, self.allow_drift),
                                               (ALLOW_DESTRUCTIVE, bool(self.allow_destructive))) if given)


def deploy_options(args: tuple[str, ...]) -> tuple[DeployOptions, list[str]]:
    """A `/deploy` comment's words → (options, words it does not know).

    >>> deploy_options(("--allow-destructive-model", "shop.orders", "--allow-large-backfill"))
    (DeployOptions(allow_large_backfill=True, allow_drift=False, allow_destructive=('shop.orders',)), [])
    >>> deploy_options(("--allow-destructive-model",))
    (DeployOptions(allow_large_backfill=False, allow_drift=False, allow_destructive=()), \
['--allow-destructive-model (needs a model name)'])
    """
    flags: set[str] = set()
    models: list[str] = []
    unknown: list[str] = []
    words = iter(args)
    for word in words:
        if word in (ALLOW_LARGE_BACKFILL, ALLOW_DRIFT):
            flags.add(word)
        elif word == ALLOW_DESTRUCTIVE or word.startswith(ALLOW_DESTRUCTIVE + "="):
            model = word.partition("=")[2] or next(words, "")
            if model and not model.startswith("--"):
                models.append(model)
            else:
                unknown.append(f"{ALLOW_DESTRUCTIVE} (needs a model name)")
        else:
            unknown.append(word)
    return DeployOptions(allow_large_backfill=ALLOW_LARGE_BACKFILL in flags, allow_drift=ALLOW_DRIFT in flags,
                         allow_destructive=tuple(models)), unknown


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
    environment: str | None = None     # DEPLOY, ROLLBACK, QUEUE: the environment it works on
    command: bool = False              # asked for by a `/deploy` or `/rollback` comment
    deploy: DeployOptions = DeployOptions()    # DEPLOY by `/deploy`: what the comment allows
    rollback_to: str | None = None     # ROLLBACK: the plan id (hex, a prefix will do) to serve; None: the previous


def classify(event: Event, settings: BotSettings) -> Decision:
    """The step `event` asks for under `settings` (pure: the payload and the trusted settings only).

    >>> from bot.github.event import Repo
    >>> decision = classify(Event("push", None, Repo("o", "r"), ref="refs/heads/main", sha="abc"), BotSettings())
    >>> decision.step, decision.environment, decision.command
    (<Step.DEPLOY: 'deploy'>, 'prod', False)
    >>> classify(Event("push", None, Repo("o", "r"), ref="refs/heads/feature", sha="abc"), BotSettings()).step
    <Step.NOTHING: 'nothing'>
    """
    pr = event.pull_request
    fork = pr is not None and pr.is_from_fork(event.repo)
    if event.is_pr_closed:
        if fork:
            return Decision(Step.NOTHING, ForkClosed(pr.number, pr.head_origin()).text)
        return Decision(Step.CLEANUP)
    if event.is_pr_sync:
        if fork:
            return Decision(Step.NOTHING, ForkNotBuilt(pr.number, pr.head_origin()).text)
        return Decision(Step.SYNC)
    if event.name == "pull_request_review" and pr is not None:
        return Decision(Step.APPROVAL)
    if event.name == "issue_comment":
        return _classify_comment(event, settings)
    if event.name == "workflow_dispatch" and event.input("allow_drift").lower() == "true":
        if event.input("rollback").lower() == "true":
            return Decision(Step.NOTHING, DispatchRollbackOrDeploy().text)
        # the default branch's head deployed again, undoing prod's drift: for required approvers only
        return Decision(Step.DEPLOY, environment=settings.merge_environment, deploy=DeployOptions(allow_drift=True))
    if event.name == "workflow_dispatch" and event.input("rollback").lower() == "true":
        return _classify_dispatched_rollback(event, settings)
    if event.name in ("schedule", "workflow_dispatch"):
        return Decision(Step.RUN)
    if event.name == "merge_group":
        return _classify_merge_group(event, settings)
    if event.name == "push" and event.deleted:
        return Decision(Step.NOTHING, RefDeleted(event.ref or "").text)
    if event.name == "push" and event.tag is None and settings.deploys_on(DeployOn.MERGE) \
            and settings.is_prod_branch(event.branch, event.repo.default_branch):
        return Decision(Step.DEPLOY, environment=settings.merge_environment)
    if ((event.name == "push" and event.tag) or (event.name == "release" and event.action == "published")) \
            and settings.deploys_on(DeployOn.TAG):
        return Decision(Step.DEPLOY, environment=settings.tag_environment)
    return Decision(Step.NOTHING, NothingForEvent(event.name, event.action or "").text)


def _classify_comment(event: Event, settings: BotSettings) -> Decision:
    comment = event.comment
    if event.action != "created" or comment is None or not comment.on_pull_request:
        return Decision(Step.NOTHING, NotANewComment().text)
    if comment.user == settings.bot_login:
        return Decision(Step.NOTHING, OwnComment().text)
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
        return Decision(Step.DEPLOY, environment=settings.merge_environment, command=True, deploy=options)
    return Decision(Step.NOTHING, CommentIgnored(parsed.reason).text)


def _classify_merge_group(event: Event, settings: BotSettings) -> Decision:
    """A merge queue entry asks for its checks (`checks_requested`) when it targets a prod branch; the queue
    branch must name the entry's pull request (`gh-readonly-queue/<base>/pr-<N>-<sha>`).

    >>> from bot.github.event import MergeGroup, Repo
    >>> group = MergeGroup("f" * 40, "refs/heads/gh-readonly-queue/main/pr-7-" + "a" * 40, "refs/heads/main")
    >>> decision = classify(Event("merge_group", "checks_requested", Repo("o", "r"), merge_group=group), BotSettings())
    >>> decision.step, decision.environment
    (<Step.QUEUE: 'queue'>, 'prod')
    """
    group = event.merge_group
    if event.action != "checks_requested" or group is None:
        return Decision(Step.NOTHING, QueueEntryNotRequested(event.action or "").text)
    if not group.pr_numbers:
        return Decision(Step.NOTHING, NotAQueueBranch(group.head_ref).text)
    if not settings.is_prod_branch(group.base_branch, event.repo.default_branch):
        return Decision(Step.NOTHING, QueueNotDeployed(group.base_branch).text)
    return Decision(Step.QUEUE, environment=settings.merge_environment)


def _classify_rollback(parsed: Command, settings: BotSettings) -> Decision:
    """`/rollback [PLAN_ID]`: the plan id is hex; a prefix will do."""
    args = parsed.args
    if len(args) > 1 or (args and not all(c in "0123456789abcdef" for c in args[0].lower())):
        return Decision(Step.REPLY, Reply(ReplyKind.BAD_ROLLBACK_ARGS, command_prefix(settings.command_namespace),
                                          "rollback", environment=settings.merge_environment).text)
    return Decision(Step.ROLLBACK, environment=settings.merge_environment, command=True,
                    rollback_to=args[0].lower() if args else None)


def _classify_dispatched_rollback(event: Event, settings: BotSettings) -> Decision:
    """The deploy workflow's `workflow_dispatch` with `rollback: true` and an optional `rollback_to` plan id."""
    target = event.input("rollback_to").strip().lower()
    if target and not all(c in "0123456789abcdef" for c in target):
        return Decision(Step.NOTHING, BadRollbackInput(settings.merge_environment, target).text)
    return Decision(Step.ROLLBACK, environment=settings.merge_environment, rollback_to=target or None)
