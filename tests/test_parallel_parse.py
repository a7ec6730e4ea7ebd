"""Cold loads in worker processes: the same models, renders, fingerprints, warnings and errors as a serial load."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

import bot.project.loader as loader
import bot.project.parallel as parallel
import bot.project.render_cache as render_cache
import bot.project.warn as warn
from bot.errors import ConfigError
from bot.fingerprint import fingerprint_models
from bot.project.loader import load_project
from bot.project.render_cache import reference_queries
from bot.project.serialize import model_to_dict

from project_files import write_files

CONFIG = """\
model_defaults:
  dialect: spark
  start: '2024-01-01'
variables:
  floor: 3
"""

FILES = {
    "macros/util.py": "from bot import macro\n\n\n@macro()\ndef doubled(evaluator, column):\n"
                      "    return f\"{column.sql(evaluator.dialect)} * 2\"\n",
    "macros/filters.sql": "{% macro positive(col) %}{{ col }} > 0{% endmacro %}\n",
    "models/a_raw.sql": "MODEL (name db.raw, kind FULL, columns (id INT, amount DOUBLE));\n"
                        "SELECT 1 AS id, 2.0 AS amount",
    "models/b_emb.sql": "MODEL (name db.emb, kind EMBEDDED);\nSELECT id, amount FROM db.raw WHERE amount > @floor",
    "models/c_uses_emb.sql": "MODEL (name db.uses_emb, kind FULL, owner me, stamp 'v1');\nSELECT id FROM db.emb",
    "models/d_star.sql": "MODEL (name db.starred, kind FULL);\nSELECT @STAR(db.raw) FROM db.raw",
    "models/e_macro.sql": "MODEL (name db.macro_user, kind FULL);\nSELECT @doubled(amount) AS a FROM db.raw",
    "models/f_jinja.sql": "MODEL (name db.jinja, kind FULL);\n\nJINJA_QUERY_BEGIN;\n"
                          "SELECT id FROM db.raw WHERE {{ positive('amount') }} AND amount >= {{ var('floor') }}\n"
                          "JINJA_END;\n",
    "models/g_blueprints.sql": "MODEL (name @{who}.orders, kind FULL, blueprints ((who := bp_a), (who := bp_b)));\n"
                               "SELECT id, '@{who}' AS who FROM db.raw",
    "models/h_incremental.sql": "MODEL (name db.daily, kind INCREMENTAL_BY_TIME_RANGE (time_column ds),\n"
                                "  cron '@daily', grain id, interval_unit day);\n"
                                "SELECT id, CAST('2024-01-01' AS DATE) AS ds FROM db.uses_emb "
                                "WHERE ds BETWEEN @start_ds AND @end_ds",
}


def _project(root: Path, extra: dict[str, str] | None = None) -> Path:
    return write_files(root, {"config.yaml": CONFIG, **FILES, **(extra or {})})


@pytest.fixture
def mode(monkeypatch: pytest.MonkeyPatch):
    """mode(True) forks workers for even a few files (counting the forks), mode(False) never forks."""
    forks: list[int] = []

    def counted(task, count, workers, **options):
        forks.append(workers)
        return parallel.fork_map(task, count, workers, **options)

    monkeypatch.setattr(loader, "fork_map", counted)
    monkeypatch.setattr(render_cache, "fork_map", counted)
    monkeypatch.setattr(parallel, "_cpus", lambda: 3)
    monkeypatch.setattr(parallel, "_single_threaded", lambda: True)   # a Spark test before left py4j threads
    monkeypatch.delenv("MESHBOT_WORKERS", raising=False)

    def set_mode(forking: bool) -> list[int]:
        monkeypatch.setattr(parallel, "MIN_ITEMS", 2 if forking else 10**9)
        monkeypatch.setattr(warn, "_SEEN", set())
        monkeypatch.setattr(warn, "EMITTED", [])
        forks.clear()
        return forks
    return set_mode


def _load(root: Path, *, use_cache: bool = False, early: bool = False) -> dict:
    """What a load gives; with `early`, parse workers also render (as the Context asks them to)."""
    project = load_project(root, use_cache=use_cache, render_gateway="local" if early else None)
    rendered = reference_queries(root=root, models=project.models, sources=project.source_digests,
                                 variables=project.config.variables, gateway="local",
                                 macro_files=project.macro_files, use_cache=use_cache,
                                 early=project.early_renders)
    return {"models": {name: model_to_dict(m) for name, m in project.models.items()},
            "order": list(project.dag.order), "digests": dict(project.source_digests), "rendered": rendered,
            "fingerprints": fingerprint_models(project.models, project.dag.order, rendered),
            "warnings": list(warn.EMITTED)}


@pytest.mark.parametrize("use_cache", [False, True])
def test_workers_load_the_same_project_as_a_serial_load(tmp_path, mode, use_cache):
    root = _project(tmp_path / "p")
    mode(False)
    serial = _load(root, use_cache=use_cache)
    forks = mode(True)
    for path in (root / ".meshbot").rglob("*.json"):
        path.unlink()
    forked = _load(root, use_cache=use_cache)
    assert forks == [3, 3]   # the parse and the render both ran in workers
    assert forked == serial
    assert len(serial["models"]) == 9 and "db.jinja" in serial["rendered"]
    assert ["stamp" in w for w in serial["warnings"]] == [True, False]   # c_uses_emb, then h_incremental
    if use_cache:   # what the workers wrote is a valid cache: the next load parses nothing
        parses: list[Path] = []
        original = loader.parse_model_file
        mode(False)
        loader.parse_model_file = lambda path, *a, **k: parses.append(path) or original(path, *a, **k)
        try:
            assert _load(root, use_cache=True) == serial
        finally:
            loader.parse_model_file = original
        assert parses == []


def _error(root: Path) -> str:
    with pytest.raises(ConfigError) as info:
        _load(root)
    return str(info.value)


def test_workers_raise_the_serial_error_of_the_first_bad_file(tmp_path, mode):
    root = _project(tmp_path / "p", {"models/c_bad.sql": "MODEL (name db.bad, kind NOPE);\nSELECT 1 AS x",
                                     "models/g_bad.sql": "MODEL (name db.bad2, cron 'not a cron');\nSELECT 1"})
    mode(False)
    serial = _error(root)
    forks = mode(True)
    assert _error(root) == serial
    assert forks == [3]
    assert "c_bad.sql:1" in serial


def test_workers_raise_the_serial_render_error(tmp_path, mode):
    root = _project(tmp_path / "p", {
        "macros/boom.py": "from bot import macro\n\n\n@macro()\ndef boom(evaluator):\n"
                          "    raise ValueError('boom')\n",
        "models/z_boom.sql": "MODEL (name db.z_boom, kind FULL);\nSELECT @boom() AS x FROM db.raw"})
    mode(False)
    serial = _error(root)
    forks = mode(True)
    assert _error(root) == serial
    assert forks == [3, 3]
    assert "z_boom" in serial


def test_few_files_a_single_cpu_or_other_threads_stay_serial(monkeypatch):
    monkeypatch.delenv("MESHBOT_WORKERS", raising=False)
    monkeypatch.setattr(parallel, "_single_threaded", lambda: True)
    monkeypatch.setattr(parallel, "MIN_ITEMS", 64)
    monkeypatch.setattr(parallel, "_cpus", lambda: 2)
    assert parallel.worker_count(63) == 0
    assert parallel.worker_count(64) == 2
    monkeypatch.setattr(parallel, "_cpus", lambda: 1)
    assert parallel.worker_count(1000) == 0
    monkeypatch.setenv("MESHBOT_WORKERS", "4")
    assert parallel.worker_count(1000) == 4
    monkeypatch.setenv("MESHBOT_WORKERS", "0")
    assert parallel.worker_count(1000) == 0
    monkeypatch.setenv("MESHBOT_WORKERS", "4")
    monkeypatch.setattr(parallel, "_single_threaded", lambda: False)
    assert parallel.worker_count(1000) == 0


def test_a_process_busy_right_now_counts_against_the_idle_cpus():
    """Counted at this moment, not over the last minute: a spinning process is seen while it runs."""
    import subprocess
    import sys
    import time

    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        deadline = time.monotonic() + 10
        while parallel._runnable_elsewhere() == 0 and time.monotonic() < deadline:
            time.sleep(0.01)   # until the child is scheduled (it stays runnable from then on)
        assert parallel._runnable_elsewhere() >= 1
        assert parallel._cpus() <= len(os.sched_getaffinity(0)) - 1
    finally:
        spinner.kill()
        spinner.wait()


def test_fork_map_keeps_order_and_leaves_failures_to_the_caller():
    def task(index: int) -> int | None:
        if index == 5:
            raise ValueError("done again by the caller")
        return None if index == 7 else index * 10

    assert parallel.fork_map(task, 11, 3) == [0, 10, 20, 30, 40, None, 60, None, 80, 90, 100]


def test_fork_map_runs_meanwhile_once_in_this_process_and_keeps_the_results():
    calls: list[int] = []
    results = parallel.fork_map(lambda index: index + 1, 6, 2, meanwhile=lambda: calls.append(os.getpid()))
    assert results == [1, 2, 3, 4, 5, 6]
    assert calls == [os.getpid()]


def test_only_a_load_that_parses_in_workers_runs_its_while_parsing_work(tmp_path, mode):
    """The Context imports the plan's modules there; a serial load has no waiting to fill."""
    root = _project(tmp_path / "p")
    calls: list[str] = []
    mode(False)
    serial = load_project(root, use_cache=False, while_parsing=lambda: calls.append("serial"))
    mode(True)
    forked = load_project(root, use_cache=False, while_parsing=lambda: calls.append("workers"))
    assert calls == ["workers"]
    assert sorted(forked.models) == sorted(serial.models)


def test_parse_workers_render_what_the_rest_of_the_project_does_not_change(tmp_path, mode, monkeypatch):
    """A cold load renders each model in the worker that parsed it (no second parse); a render that
    failed there, or looked up an EMBEDDED parent or a model's columns (@STAR), is done again with
    the whole project."""
    root = _project(tmp_path / "p")
    mode(False)
    serial = _load(root)
    forks = mode(True)
    left: list[str] = []
    original = render_cache._render_in_workers
    monkeypatch.setattr(render_cache, "_render_in_workers", lambda names, render: left.extend(names) or
                        original(names, render))
    forked = _load(root, early=True)
    assert forked == serial
    assert sorted(left) == ["db.starred", "db.uses_emb"]
    assert forks == [3, 2]   # the parse (and the renders), then the two renders left


def test_early_renders_serve_only_the_settings_they_were_rendered_with(tmp_path, mode):
    root = _project(tmp_path / "p")
    mode(True)
    project = load_project(root, use_cache=False, render_gateway="local")
    early = project.early_renders
    assert early is not None and early.by_model["db.raw"].sql.startswith("SELECT 1 AS")
    assert early.by_model["db.macro_user"].sql == 'SELECT `amount` * 2 AS `a` FROM `db`.`raw`'

    def rendered(**settings) -> dict[str, str]:
        options = {"variables": project.config.variables, "gateway": "local", "early": early, **settings}
        return reference_queries(root=root, models=project.models, sources=project.source_digests,
                                 macro_files=project.macro_files, use_cache=False, **options)

    marked = dataclasses.replace(early.by_model["db.raw"], sql="SELECT 'marked'")
    stale = render_cache.EarlyRenders("local", early.variables, {**early.by_model, "db.raw": marked})
    assert rendered(early=stale)["db.raw"] == "SELECT 'marked'"   # taken when the settings match
    assert rendered(early=stale, gateway="other")["db.raw"] != "SELECT 'marked'"
    assert rendered(early=stale, variables={"floor": 4})["db.raw"] != "SELECT 'marked'"
    assert "4" in rendered(early=stale, variables={"floor": 4})["db.emb"]
    assert "3.0" in rendered(early=stale, variables={"floor": 3.0})["db.emb"]   # 3.0 renders as 3.0, not 3


@pytest.mark.parametrize("files", [
    {"models/a.sql": "MODEL (name db.x, kind FULL);\nSELECT 1 AS new_version",
     "models/b.sql": "MODEL (name db.x, kind FULL, enabled false);\nSELECT 1 AS old_version"},
    {"models/b_old.sql": "MODEL (name db.x, kind FULL, enabled false);\nSELECT id FROM db.raw",
     "models/c_new.sql": "MODEL (name db.x, kind FULL);\nSELECT @STAR(db.raw) FROM db.raw"},
    {"models/a_legacy.sql": "MODEL (name db.x, kind FULL, enabled false);\nSELECT 1 AS legacy_sql",
     "models/x.py": "from bot import model\n\n\n@model('db.x', is_sql=True, kind='FULL')\n"
                    "def entrypoint(evaluator):\n    return 'SELECT 2 AS from_python'\n"},
], ids=["disabled-after", "disabled-before-a-failed-render", "python-instead"])
def test_a_disabled_model_s_render_never_stands_for_the_model_of_its_name(tmp_path, mode, files):
    root = _project(tmp_path / "p", {**files, "models/z_child.sql": "MODEL (name db.child, kind FULL);\n"
                                                                     "SELECT * FROM db.x"})
    mode(False)
    serial = _load(root)
    mode(True)
    assert _load(root, early=True) == serial


def test_a_worker_with_the_collector_paused_frees_garbage_only_past_its_memory_budget(monkeypatch):
    """Freeing is skipped while it is cheap to (a cold load's workers, ~35 KB per model), not without end."""
    import gc

    from bot.project.cache import paused_gc

    def collections(index: int) -> int:
        [[] for _ in range(100)]   # some garbage
        return gc.get_stats()[0]["collections"]

    monkeypatch.setattr(parallel, "COLLECT_EVERY", 4)
    with paused_gc():
        monkeypatch.setattr(parallel, "GARBAGE_BUDGET", 1 << 50)
        under = parallel.fork_map(collections, 16, 1)
        monkeypatch.setattr(parallel, "GARBAGE_BUDGET", -1)
        over = parallel.fork_map(collections, 16, 1)
    assert under[-1] == under[0]
    assert over[-1] - over[0] == 3   # after 4, 8 and 12 items
