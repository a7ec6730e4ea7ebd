"""User files (Python models, macros, config.py) imported from several threads at once each see
meshbot's `sqlmesh` stand-in for their whole import, as concurrent backfill tasks do."""

from __future__ import annotations

import threading
from pathlib import Path
import time

from bot.project.sqlmesh_shim import sqlmesh_shim


def test_one_threads_shim_is_not_taken_away_from_another_mid_import():
    first_inside, first_left = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def first() -> None:
        with sqlmesh_shim():
            first_inside.set()
            time.sleep(0.3)   # the second thread tries to start its import meanwhile
        first_left.set()

    def second() -> None:
        first_inside.wait(5)
        try:
            with sqlmesh_shim():
                first_left.wait(5)   # the first import has ended; this one has not
                import sqlmesh
                assert sqlmesh.model is not None
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert errors == []


def _plant_compiled(source: Path, code: str) -> None:
    """A compiled file beside `source` holding other code, as a commit or another job could leave it: unchecked
    hash-based, which Python runs without looking at the source."""
    import importlib.util
    import py_compile

    decoy = source.with_name(f"decoy_{source.name}")
    decoy.write_text(code)
    py_compile.compile(str(decoy), cfile=importlib.util.cache_from_source(str(source)), doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    decoy.unlink()


def test_project_python_runs_from_its_source_never_from_a_compiled_file_beside_it(tmp_path):
    """A macro file and a helper it imports from the project root are compiled from their source: a planted
    .pyc in __pycache__ (reviewers read the .py, not the binary) is never run, and none is written."""
    import importlib
    import sys

    from bot.project.sqlmesh_shim import import_user_file

    (tmp_path / "config.yaml").write_text("model_defaults: {dialect: spark}\n")
    (tmp_path / "helper.py").write_text("VALUE = 'reviewed source'\n")
    (tmp_path / "macros").mkdir()
    macro = tmp_path / "macros" / "m.py"
    macro.write_text("from helper import VALUE\nRESULT = VALUE\nOWN = 'reviewed macro'\n")
    _plant_compiled(tmp_path / "helper.py", "VALUE = 'planted'\n")
    _plant_compiled(macro, "RESULT = OWN = 'planted'\n")

    sys.path.insert(0, str(tmp_path))   # the plant works on Python's own importer
    try:
        assert importlib.import_module("helper").VALUE == "planted"
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("helper", None)
        sys.path_importer_cache.pop(str(tmp_path), None)

    before = sorted(p.name for p in tmp_path.rglob("*.pyc"))
    names = import_user_file(macro, root=tmp_path)
    assert (names["RESULT"], names["OWN"]) == ("reviewed source", "reviewed macro")
    assert sorted(p.name for p in tmp_path.rglob("*.pyc")) == before
