"""main(): build the bot's dependencies from the GitHub Actions environment, dispatch, return an exit code."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Mapping

from bot.context import Context
from bot.errors import BotError, GithubError
from bot.github.ports import EngineContext, TokenPermissionError
from bot.github.base_changes import load_base_versions
from bot.github.checkout import GitCheckout
from bot.github.event import PullRequest, load_event
from bot.github.seal import SealedContext
from bot.github.hosts import Host, actions_host, local_host
from bot.github.runners import COMMANDS, BotRun, dispatch
from bot.github.settings import load_settings
from bot.github.timing import PHASES, PhaseTimings, TimedContext, TimedGithub
from bot.github.trusted import read_trusted_config
from bot.redact import redact, register
from bot.report.markdown import render
from bot.report.media import WorkflowCommand, plain_text, workflow_command


@dataclass(frozen=True)
class Invocation:
    """Everything the command line and the environment say about one run (no token in repr)."""

    command: str = "run-all"
    event_name: str | None = None
    event_path: str | None = None
    output_dir: str | None = None
    project_path: str = "."
    other_paths: tuple[str, ...] = ()   # a multi-repo project's other folders (its config is project_path's)
    gateway: str | None = None
    token: str | None = None
    answers: str | None = None       # local mode: JSON file of what GitHub would answer
    config: str | None = None        # the action's `config` input: trusted bot settings (YAML mapping)
    notify: bool = False             # local mode: tell the notification targets too (Actions always does)

    def __repr__(self) -> str:
        return f"Invocation(command={self.command!r}, event_name={self.event_name!r}, local={self.output_dir!r})"


def main(invocation: Invocation, *, env: Mapping[str, str] | None = None,
         context_factory: Callable[[str, str | None], EngineContext] | None = None,
         out: Callable[[str], None] = print) -> int:
    """Run one bot command; BotErrors become an `::error::` line and exit code 1. Every line printed, like
    everything posted to GitHub, has the known secrets (the GitHub token among them) redacted."""
    env = os.environ if env is None else env
    for token in (invocation.token, env.get("GITHUB_TOKEN"), env.get("INPUT_GITHUB_TOKEN")):
        register(token)
    shown = out

    def out(line: str) -> None:
        if isinstance(line, WorkflowCommand):
            shown(line if line.startswith("::add-mask::") else redact(line))
        else:
            shown(plain_text(redact(line)))

    run: BotRun | None = None
    try:
        if invocation.command not in COMMANDS:
            raise GithubError(f"unknown command `{invocation.command}`; one of: {', '.join(COMMANDS)}")
        run = build_run(invocation, env=env, context_factory=context_factory, out=out)
        code = dispatch(run, invocation.command)
        _report_timings(run, out)
        return code
    except TokenPermissionError as error:
        return _read_only_notice(run, error, out)
    except BotError as error:
        return _error(str(error), out)
    except Exception as error:   # noqa: BLE001 - no traceback from a bot command: one clear line, exit 1
        return _error(f"unexpected {type(error).__name__} while running `{invocation.command}`: {error}", out)


def _report_timings(run: BotRun, out: Callable[[str], None]) -> None:
    """The per-phase line (stdout) and table (job summary) of a run that did engine work."""
    timings = run.timings
    if timings is None or not any(timings.seconds[p] for p in PHASES if p != "comment"):
        return
    total = timings.total()
    out(timings.line(total))
    run.outputs.summary(render("timings.md.j2", timings.rows(total)))


def _error(text: str, out: Callable[[str], None]) -> int:
    out(workflow_command("error", redact(text), title="meshbot"))
    return 1


def _read_only_notice(run: BotRun | None, error: TokenPermissionError, out: Callable[[str], None]) -> int:
    """A read-only token (fork PRs) is a situation to explain, not a crash: warn, summarize, exit 0."""
    pr = run.pull_request if run is not None else None
    fork = pr is not None and pr.is_from_fork(run.event.repo)
    who = f"Pull request #{pr.number} comes from {pr.head_origin()}: " if fork and pr else ""
    text = (f"meshbot: {who}the GitHub token is read-only here, so meshbot could not post its comment or "
            f"check runs and stopped. A maintainer can push the branch to this repository (or re-run the "
            f"workflow with a token that has `pull-requests: write` and `checks: write`). Detail: {error}")
    out(workflow_command("warning", redact(text), title="meshbot"))
    if run is not None:
        run.outputs.summary(text)
    return 0


def build_run(invocation: Invocation, *, env: Mapping[str, str],
              context_factory: Callable[[str, str | None], EngineContext] | None = None,
              out: Callable[[str], None] = print) -> BotRun:
    """Everything a runner needs, with the project sealed: the event, the GitHub port, the trusted
    settings (never the checkout's files) and the checkout's HEAD. Nothing of the project is read here."""
    event_name = invocation.event_name or env.get("GITHUB_EVENT_NAME")
    event_path = invocation.event_path or env.get("GITHUB_EVENT_PATH")
    if not event_name or not event_path:
        raise GithubError("no event: pass --event-name and --event-path (or run inside GitHub Actions, "
                          "which sets GITHUB_EVENT_NAME and GITHUB_EVENT_PATH)")
    event = load_event(name=event_name, path=event_path, repository=env.get("GITHUB_REPOSITORY"),
                       ref=env.get("GITHUB_REF"))
    timings = PhaseTimings()
    local = invocation.output_dir is not None or env.get("GITHUB_ACTIONS") != "true"
    # in Actions the checkout is the workspace itself, not a folder of it the checked-out files shape
    checkout = GitCheckout(Path(invocation.project_path if local or not env.get("GITHUB_WORKSPACE")
                                else env["GITHUB_WORKSPACE"]))
    if not local and invocation.answers:
        raise GithubError("--answers is for local mode only (with --output-dir, or outside GitHub Actions)")
    host: Host = (local_host(event, checkout, output_dir=invocation.output_dir, answers=invocation.answers) if local
                  else actions_host(event, token=invocation.token, env=env, out=out))
    subdir = host.subdir(invocation.project_path)
    others = tuple(host.subdir(path) for path in invocation.other_paths)
    default_branch = host.default_branch
    config_input = invocation.config if invocation.config is not None else env.get("MESHBOT_CICD_BOT")
    trusted = read_trusted_config(input_text=config_input, default_branch=default_branch, project_subdir=subdir)
    if default_branch is None and not trusted.trusted:
        trusted = replace(trusted, missing=host.missing)
    settings = load_settings(trusted.cicd_bot, trusted.users, gateway=invocation.gateway, where=trusted.where)
    host.signed_in_as(settings.bot_login)
    paths = [invocation.project_path, *invocation.other_paths]

    loaded_bases: dict[tuple[int, str], dict[str, str] | None] = {}

    def base_versions(pr: PullRequest) -> dict[str, str] | None:
        """The base commit's model versions: its files exported from git and loaded like the project
        (default-branch code in a PR job; called only once the event is authorized); loaded once per base
        (the prod preview and the drift check both ask)."""
        def versions(folders: list[Path]) -> dict[str, str]:
            base = (context_factory(str(folders[0]), invocation.gateway) if context_factory is not None
                    else Context(folders, gateway=invocation.gateway, read_cache=False))
            return base.model_versions()

        key = (pr.number, pr.base_sha)
        if key not in loaded_bases:
            with timings.phase("plan"):
                loaded_bases[key] = load_base_versions([GitCheckout(Path(path)) for path in paths], pr, versions)
        return loaded_bases[key]

    seal = SealedContext(_project_opener(invocation, paths, context_factory, out))
    return BotRun(event=event, settings=settings, github=TimedGithub(host.github, timings),
                  context=TimedContext(seal, timings, out=out), outputs=host.outputs, timings=timings, seal=seal,
                  trusted=trusted, checkout_head=checkout.head(), on_default_branch=host.on_default_branch,
                  commits_behind=host.commits_behind, default_branch_head=host.default_branch_head,
                  base_versions=base_versions,
                  project_subdir=subdir, other_subdirs=others, sha=env.get("GITHUB_SHA"), run_url=_run_url(env),
                  on_actions_runner=env.get("GITHUB_ACTIONS") == "true", notify=not local or invocation.notify)


def _project_opener(invocation: Invocation, paths: list[str],
                    context_factory: Callable[[str, str | None], EngineContext] | None,
                    out: Callable[[str], None]) -> Callable[[bool, frozenset[str] | None], EngineContext]:
    """What opens the project once the seal lets it (bot.github.seal)."""
    def project(read_cache: bool, fresh_files: frozenset[str] | None) -> EngineContext:
        if context_factory is not None:
            return context_factory(invocation.project_path, invocation.gateway)
        context = Context(paths, gateway=invocation.gateway, read_cache=read_cache, fresh_files=fresh_files)
        context.stage_log = out   # the job log: a line as each apply stage starts and ends, with its time
        return context
    return project


def _run_url(env: Mapping[str, str]) -> str | None:
    """The workflow run's page, when GitHub Actions says where it is."""
    parts = [env.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")]
    if not all(parts):
        return None
    server, repository, run_id = parts
    return f"{server.rstrip('/')}/{repository}/actions/runs/{run_id}"


if __name__ == "__main__":   # pragma: no cover - `python -m bot.github.action COMMAND`
    sys.exit(main(Invocation(command=sys.argv[1] if len(sys.argv) > 1 else "run-all")))
