"""Rollback: serve an environment's earlier plan again by repointing its views, without computing anything."""

from __future__ import annotations

import contextlib
import time
import uuid
from dataclasses import dataclass

from bot.errors import PlanError
from bot.plan.claims import environment_key
from bot.plan.definition import Plan, PlanOptions
from bot.plan.drift import local_source
from bot.plan.evaluator import PlanEvaluator
from bot.plan.execution import finish_promotion
from bot.plan.stages import promotion_stages
from bot.state.protocol import Environment, EnvironmentSnapshot, HistoryEntry, StateReader, require_environment


@dataclass(frozen=True)
class RollbackResult:
    """What a rollback did: `environment` now serves `to_plan_id`'s snapshots under the new `plan_id`."""

    environment: str
    plan_id: str
    from_plan_id: str
    to_plan_id: str
    repointed: tuple[str, ...]     # models whose view now selects another table (or was added or dropped)
    seconds: float = 0.0

    def lines(self) -> list[str]:
        head = (f"Rolled `{self.environment}` back from plan {self.from_plan_id[:8]} to plan {self.to_plan_id[:8]}'s "
                f"snapshots (new plan {self.plan_id[:8]}) in {self.seconds:.1f} s: "
                f"{len(self.repointed)} view(s) repointed, nothing computed.")
        return [head, *(f"  {name}" for name in self.repointed)]


def rollback(evaluator: PlanEvaluator, environment: str, *, to_plan_id: str | None = None) -> RollbackResult:
    """Serve `to_plan_id`'s snapshots (default: the plan before the current one) in `environment` again,
    under its lease (a rollback and an apply take turns). Refused, with nothing written, when that plan
    is not in the environment's history or the janitor removed its snapshots or tables."""
    started = time.monotonic()
    claims = evaluator.claims
    purpose = f"rollback of `{environment}`"
    hold = claims.hold(environment_key(environment), purpose) if claims else contextlib.nullcontext()
    with hold:
        current = finish_promotion(evaluator.state, evaluator.runner, environment)
        if current is None:
            raise PlanError(f"cannot roll back `{environment}`: the environment does not exist.")
        target = choose_target(current, evaluator.state.get_environment_history(environment), to_plan_id)
        check_target(evaluator, target)
        plan_id = uuid.uuid4().hex
        served = Environment(name=environment, snapshots=target.snapshots, plan_id=plan_id,
                             previous_plan_id=current.plan_id, start=current.start, end=current.end,
                             expiration_ts=current.expiration_ts, suffix_target=current.suffix_target,
                             previous_snapshots=current.snapshots)
        plan = Plan(plan_id=plan_id, environment=environment, new_environment=False,
                    expected_plan_id=current.plan_id, previous_environment=current, snapshots={},
                    new_snapshots=(), changes=(), backfills=(),
                    options=PlanOptions(source=local_source(f"rollback to {target.plan_id[:12]}")))
        evaluator.run(promotion_stages(served, current), plan, environment=served, stored=current)
    return RollbackResult(environment=environment, plan_id=plan_id, from_plan_id=current.plan_id,
                          to_plan_id=target.plan_id, repointed=repointed(current.snapshots, target.snapshots),
                          seconds=time.monotonic() - started)


def check_reachable(state: StateReader, environment: str, to_plan_id: str | None) -> None:
    """Refuse, from state alone (before Spark starts), a rollback of an environment that does not exist or
    to a plan it never served; `rollback` checks again under the environment's lease."""
    current = require_environment(state, environment)
    choose_target(current, state.get_environment_history(environment), to_plan_id)


def choose_target(current: Environment, history: list[HistoryEntry], to_plan_id: str | None) -> HistoryEntry:
    """The history entry to serve again: `to_plan_id` (a unique prefix) or the current plan's previous one."""
    name = current.name
    if to_plan_id is None:
        if current.previous_plan_id is None:
            raise PlanError(f"cannot roll back `{name}`: its plan {current.plan_id[:8]} is the first it served, "
                            "so there is no previous plan.")
        found = [e for e in history if e.plan_id == current.previous_plan_id]
        if not found and current.previous_snapshots:   # promoted before the state kept a history
            found = [HistoryEntry(name, current.previous_plan_id, current.previous_snapshots, 0)]
        wanted = current.previous_plan_id
    else:
        found = [e for e in history if e.plan_id.startswith(to_plan_id)]
        wanted = to_plan_id
    if not found:
        raise PlanError(f"cannot roll back `{name}` to plan {wanted[:8]}: it is not in the environment's "
                        f"history (`meshbot environments {name} --history` lists the plans it served).")
    if len(found) > 1:
        raise PlanError(f"cannot roll back `{name}`: plan id `{wanted}` matches {len(found)} plans "
                        f"({', '.join(e.plan_id[:12] for e in found)}); give more of it.")
    if found[0].plan_id == current.plan_id:
        raise PlanError(f"cannot roll back `{name}` to plan {wanted[:8]}: the environment serves it now.")
    return found[0]


def check_target(evaluator: PlanEvaluator, target: HistoryEntry) -> None:
    """The target's snapshots must still be stored and their physical tables exist (no recompute)."""
    name, plan = target.environment, target.plan_id[:8]
    ids = [s.snapshot_id for s in target.snapshots]
    gone = sorted(i.name for i in set(ids) - set(evaluator.state.get_snapshots(ids)))
    if gone:
        raise PlanError(f"cannot roll back `{name}` to plan {plan}: the janitor removed the snapshots of "
                        f"{_names(gone)} from the state; apply that version of the project instead.")
    tables = sorted({s.table_name for s in target.snapshots if s.has_view})
    existing = getattr(evaluator.runner, "existing_views", None)   # a fresh listing of tables and views
    present = existing(tables) if existing is not None else set(tables)
    missing = [t for t in tables if t not in present]
    if missing:
        raise PlanError(f"cannot roll back `{name}` to plan {plan}: the tables {_names(missing)} are missing "
                        "from the catalog (the janitor dropped them, or someone else did); apply that version "
                        "of the project instead.")


def repointed(before: tuple[EnvironmentSnapshot, ...], after: tuple[EnvironmentSnapshot, ...]) -> tuple[str, ...]:
    old = {s.name: s.table_name for s in before}
    new = {s.name: s.table_name for s in after}
    return tuple(sorted(n for n in old.keys() | new.keys() if old.get(n) != new.get(n)))


def _names(names: list[str]) -> str:
    shown = ", ".join(f"`{n}`" for n in names[:5])
    return shown + (f" and {len(names) - 5} more" if len(names) > 5 else "")

