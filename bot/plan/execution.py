"""What an apply and a scheduled run both do: finish a promotion, order snapshots, scope tasks, report failures."""

from __future__ import annotations

import contextlib
from typing import Callable, Iterable, Sequence

from bot.errors import BotError, EngineError, QualityError
from bot.plan.batch import BatchRunner
from bot.plan.definition import Plan
from bot.project.dag import topological_order
from bot.snapshot import Snapshot
from bot.state.protocol import Environment, StateSync


def finish_promotion(state: StateSync, runner: BatchRunner, name: str) -> Environment | None:
    """Complete a promotion a killed plan left unfinished: write every view of the stored row, then
    finalize it. Returns the environment's row as stored afterwards (None when there is none).

    Plans and runs call this before anything else, so an environment row never stays unserved.
    """
    env = state.get_environment(name)
    if env is None or env.finalized_ts is not None:
        return env
    runner.replace_views(env.views())
    runner.drop_views(env.stale_views())
    state.finalize(name, env.plan_id)
    return state.get_environment(name)


def order_snapshots(snapshots: Iterable[Snapshot]) -> list[Snapshot]:
    """Parents before children, following the snapshots' recorded parents (bot.project.dag's order)."""
    by_name = {s.name: s for s in snapshots}
    return [by_name[name] for name in topological_order(
        {name: [p.name for p in s.parents] for name, s in by_name.items()})]


def parents_in(plan: Plan) -> Callable[[str], list[str]]:
    """Model name -> its parents' names, as the plan's snapshots record them."""
    def parents(name: str) -> list[str]:
        snapshot = plan.snapshots.get(name)
        return [p.name for p in snapshot.parents] if snapshot is not None else []
    return parents


def task_scope_for(runner: object, threads: int) -> Callable[[int], contextlib.AbstractContextManager]:
    """Slot -> the context a concurrent task runs in (the runner's, e.g. a Spark scheduler pool);
    nothing when tasks run one at a time on the calling thread."""
    factory = getattr(runner, "task_scope", None)
    if threads <= 1 or factory is None:
        return lambda _slot: contextlib.nullcontext()
    return factory()


def raise_failures(failed: Sequence[tuple[str, BotError]], skipped: Sequence[str]) -> None:
    """One error for every failed model (named with Spark's message) and the models it stopped."""
    messages = [str(error) if f"`{name}`" in str(error) else f"model `{name}` failed: {error}"
                for name, error in failed]
    text = "; ".join(messages)
    if skipped:
        text += "; not evaluated because an upstream model failed: " + ", ".join(f"`{n}`" for n in skipped)
    first = failed[0][1]
    if isinstance(first, QualityError):
        raise QualityError(text, failures=first.failures) from first
    raise EngineError(text) from first
