"""One project's lazily built parts: config, parsed project, state, leases, Spark engine and runners."""

from __future__ import annotations

import contextlib
import threading
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from bot.project.config import Gateway, ProjectConfig
from bot.project.meshbot_dir import checked
from bot.project.model import Model

if TYPE_CHECKING:
    from bot.plan.batch_runner import SparkRunner, SparkWork
    from bot.plan.claims import Claims
    from bot.project.loader import Project
    from bot.spark.engine import SparkEngine
    from bot.state.store import SqlStateSync


def _import_plan_modules() -> None:
    """Import what a plan needs after the load (state and its SQLAlchemy, the plan builder), while
    worker processes parse a cold project and this process would only wait."""
    import importlib

    for module in ("bot.plan.builder", "bot.state.connect"):
        importlib.import_module(module)


class Workspace:
    """The parts bot.context.Context works with, each built when first needed: the project is parsed
    on first use; state and Spark start only when an operation needs them. Heavy layers are imported
    where a part is built, so that `plan --explain` never imports PySpark or SQLAlchemy's dialects."""

    def __init__(self, path: str | Path | Sequence[str | Path] = ".", *, gateway: str | None = None,
                 read_cache: bool = True, fresh_files: frozenset[str] | None = None) -> None:
        # several folders: a multi-repo project (bot.project.repositories); the first one's config rules
        self.paths = tuple(Path(p).resolve() for p in ([path] if isinstance(path, (str, Path)) else path))
        if not self.paths:
            raise ValueError("a project needs at least one folder")
        self.path = self.paths[0]
        self.gateway_name = gateway
        self.read_cache = read_cache   # False: parse and render everything, only write .meshbot/cache
        self.fresh_files = fresh_files   # a pull request's own files: never taken from .meshbot/cache (load_project)

    @cached_property
    def config(self) -> ProjectConfig:
        from bot.project.config import load_config

        return load_config(self.path)

    @cached_property
    def gateway(self) -> Gateway:
        return self.config.gateway(self.gateway_name)

    @cached_property
    def project(self) -> Project:
        from bot.plan.unloaded_repositories import with_unloaded_repositories
        from bot.project.repositories import load_repositories

        loaded = load_repositories(self.paths, config=self.config, read_cache=self.read_cache,
                                   fresh_files=self.fresh_files, while_parsing=_import_plan_modules,
                                   render_gateway=self.gateway_name or self.config.default_gateway)
        return with_unloaded_repositories(loaded, lambda: self.state)

    def load(self) -> None:
        """Parse the project now rather than on the first call that needs it."""
        self.project  # noqa: B018 - builds the cached project

    def _linted(self) -> bool:
        """Whether a plan lints first: any repository's `linter.enabled`."""
        return any(repository.config.linter.enabled for repository in self.project.repositories)

    def start_engine(self) -> None:
        """Start the Spark session now rather than on the first call that needs it."""
        self.engine  # noqa: B018 - builds the cached session

    @property
    def models(self) -> dict[str, Model]:
        return self.project.models

    @cached_property
    def state(self) -> SqlStateSync:
        from bot.state.connect import connect_state

        checked(self.path)   # the default SQLite file is .meshbot/state.db
        return connect_state(self.gateway.state_connection, project_root=self.path)

    def existing_state(self) -> SqlStateSync | None:
        """The state, or None when the project has none yet: unlike `state`, it is not created for the asking."""
        from bot.errors import StateError
        from bot.state.connect import connect_state

        if "state" not in self.__dict__:
            try:
                found = connect_state(self.gateway.state_connection, project_root=self.path, create=False)
            except StateError as error:
                if str(error).startswith("no meshbot state found"):
                    return None
                raise
            self.__dict__["state"] = found
        return self.state

    def last_intervals(self, environment: str = "prod") -> dict[str, tuple[int, int]] | None:
        """Each model `environment` serves with its last recorded interval (start, end; epoch ms, end
        exclusive): the one that ends latest; a model with none is left out. None when the project has
        no state yet (none is created for this); Spark never starts."""
        from bot.snapshot import normalize_environment

        state = self.existing_state()
        if state is None:
            return None
        env = state.get_environment(normalize_environment(environment))
        recorded = state.get_intervals([(s.name, s.version) for s in env.snapshots]) if env else {}
        return {name: (int(start), int(end)) for (name, _), found in recorded.items() if found.intervals
                for start, end in [max(found.intervals, key=lambda interval: interval[1])]}

    @cached_property
    def claims(self) -> Claims:
        """This context's leases in the state (one applier per environment, one writer per batch)."""
        from bot.plan.claims import Claims

        return Claims(self.state)

    @cached_property
    def engine(self) -> SparkEngine:
        return self._new_engine()

    def _new_engine(self, *, catalog_only: bool = False) -> SparkEngine:
        from bot.spark.engine import SparkEngine
        from bot.spark.session import get_session

        return SparkEngine(get_session(self.gateway.connection, state_dir=checked(self.path),
                                       catalog_only=catalog_only))

    def attach_early(self) -> None:
        """Attach to the project's warm engine on a thread while the caller plans, when one already runs with
        this gateway's settings (never starts one: a plan with nothing to do needs no Spark). Call it once the
        project is loaded: loading imports its Python files and reads sys.modules, which imports on a thread
        change. A failure is left for the first use of `engine` to raise."""
        from bot.spark.session import get_session
        from bot.spark.warm import warm_running

        connection, state_dir = self.gateway.connection, checked(self.path)
        if "engine" in self.__dict__ or not warm_running(connection, state_dir):
            return

        def attach() -> None:   # the process's one session: `engine` waits on its lock, then takes it
            with contextlib.suppress(Exception):
                get_session(connection, state_dir=state_dir)

        threading.Thread(target=attach, name="meshbot-attach", daemon=True).start()

    def fetch_rows(self, sql: str, *, limit: int | None = None) -> list[dict]:
        """The rows of `sql`: through the warm engine's query socket while this context has no Spark session
        of its own (no PySpark import, no session to open), else on its engine."""
        if "engine" not in self.__dict__:
            from bot.spark.warm import warm_rows

            rows = warm_rows(self.gateway.connection, state_dir=checked(self.path), sql=sql, limit=limit)
            if rows is not None:
                return rows
        return self.engine.fetch(sql, limit=limit)

    def _start_engine_for_catalog(self) -> None:
        """Start Spark for catalog statements only (see get_session), unless this context has it already."""
        if "engine" not in self.__dict__:
            self.__dict__["engine"] = self._new_engine(catalog_only=True)

    def _spark_runner(self, *, project: bool = True) -> SparkRunner:
        """A runner on this context's Spark; without `project`, one that reads no project file."""
        from bot.plan.batch_runner import SparkRunner

        return SparkRunner(engine=self.engine, context_models=self.models if project else {}, config=self.config,
                           gateway=self.gateway.name, audits=self.project.audits if project else {},
                           concurrent_tasks=self.gateway.connection.concurrent_tasks)

    def _work(self, *, project: bool = True) -> SparkWork:
        """State, leases and a Spark runner, for an apply, a run or a rollback."""
        from bot.plan.batch_runner import SparkWork

        return SparkWork(runner=self._spark_runner(project=project), state=self.state, claims=self.claims)

    def _forget_state(self) -> None:
        """Close the state and drop it and its leases (after `destroy` dropped their tables)."""
        self.close()
        self.__dict__.pop("state", None)
        self.__dict__.pop("claims", None)

    def close(self) -> None:
        if "state" in self.__dict__:
            self.state.close()
