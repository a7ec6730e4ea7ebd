"""Real `meshbot` processes with a local JVM of their own: only meshbot's lines reach the terminal, `-v`
lets Spark's JVM speak again, and a copy of a project made with its .meshbot/ is refused before writing.

The two JVMs start side by side once for the module: a failing query at default verbosity in one
project, and a table created with `-v` in another; the copy test copies the second. Two commands on one
project take turns on its embedded catalog.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.project.example import write_example
from bot.spark.session import foreign_databases
from spark_servers import JVM_LINES, QUICK_JVM

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.spark   # meshbot subprocesses start Spark; one test reads the run's session


def _env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("SPARK_", "PYSPARK_"))}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    return env


def _start(project: Path, *args: str, verbose: bool = False) -> subprocess.Popen:
    options = ["-v"] if verbose else []
    return subprocess.Popen([sys.executable, "-m", "bot", *options, "-p", str(project), *args], cwd=ROOT,
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@dataclass(frozen=True)
class Finished:
    project: Path
    code: int
    out: str
    err: str


def _finish(project: Path, process: subprocess.Popen) -> Finished:
    try:
        out, err = process.communicate(timeout=400)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
    return Finished(project, process.returncode, out, err)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Finished]:
    quiet, loud = tmp_path_factory.mktemp("quiet") / "shop", tmp_path_factory.mktemp("loud") / "shop"
    for project in (quiet, loud):
        write_example(project)
        config = project / "config.yaml"   # short-lived JVMs: C1 alone (see spark_servers.QUICK_JVM)
        assert "      master: local[*]\n" in config.read_text()
        config.write_text(config.read_text().replace(
            "      master: local[*]\n",
            f"      master: local[*]\n      config:\n        spark.driver.extraJavaOptions: {QUICK_JVM}\n"))
    error = _start(quiet, "fetchdf", "SELECT no_such_column FROM (SELECT 1 AS one)")
    verbose = _start(loud, "fetchdf", "--allow-writes", "CREATE DATABASE shop_copy_check", verbose=True)
    return {"quiet": _finish(quiet, error), "verbose": _finish(loud, verbose)}


def test_default_output_has_no_jvm_lines(runs):
    """An analysis error is still reported, once, as meshbot's own error, and nothing else is printed.
    (A successful `plan --auto-apply` with a local driver is checked for JVM lines in test_spark_connect.)"""
    run = runs["quiet"]
    assert run.code == 1, f"{run.out}\n{run.err}"
    assert "Error: running query: [UNRESOLVED_COLUMN" in run.out + run.err
    assert (run.out + run.err).count("no_such_column") == 1
    assert not JVM_LINES.search(run.out + run.err), f"JVM output reached the terminal:\n{run.out}\n{run.err}"
    assert (run.project / ".meshbot" / "spark.log").is_file()   # where the JVM's own streams went


def test_verbose_restores_the_jvms_own_output(runs):
    run = runs["verbose"]
    assert run.code == 0, f"{run.out}\n{run.err}"
    assert "Using Spark's default log4j profile" in run.err
    assert "Setting default log level" in run.err
    assert "NativeCodeLoader" in run.err


def test_copy_with_its_catalog_is_refused_before_writing(runs, tmp_path):
    original = runs["verbose"].project
    assert runs["verbose"].code == 0, runs["verbose"].err
    warehouse = original / ".meshbot" / "warehouse"
    before = sorted(p.relative_to(warehouse) for p in warehouse.rglob("*"))
    assert Path("shop_copy_check.db") in before

    copy = tmp_path / "copy"
    shutil.copytree(original, copy, symlinks=True)
    jvm_log = copy / ".meshbot" / "spark.log"
    jvm_log.write_text("")
    refused = _finish(copy, _start(copy, "fetchdf", "--allow-writes",
                                   "CREATE TABLE shop_copy_check.t AS SELECT 1 AS x"))
    assert refused.code == 1, refused.out + refused.err
    err = refused.err.strip()
    assert err.startswith("Error: the catalog in ") and "belongs to another copy of this project" in err
    assert str(warehouse) in err and str(copy / ".meshbot") in err and "Nothing was written" in err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert sorted(p.relative_to(warehouse) for p in warehouse.rglob("*")) == before   # original untouched
    # The original recorded its warehouse, so the copy was refused before its JVM started.
    assert jvm_log.read_text() == ""


def test_catalog_check_finds_databases_of_another_warehouse(spark, spark_state_dir, tmp_path):
    """A catalog without that record (made before it was kept) is checked in the running session: the
    run's own catalog is foreign to any other project's warehouse, and its own warehouse's to nobody."""
    databases = spark.catalog.listDatabases()
    assert foreign_databases(databases, (spark_state_dir / "warehouse").resolve()) == []
    foreign = foreign_databases(databases, (tmp_path / ".meshbot" / "warehouse").resolve())
    assert ("default", (spark_state_dir / "warehouse").resolve()) in foreign


def test_two_commands_at_once_with_spark_in_their_own_process_take_turns_on_the_catalog(tmp_path):
    """Spark inside each command (MESHBOT_WARM_ENGINE=0, as in every test): the embedded Derby catalog admits
    one JVM, so the second command waits for the first, says for whom, and then runs; no traceback."""
    project = tmp_path / "shop"
    write_example(project)
    config = project / "config.yaml"
    config.write_text(config.read_text().replace(
        "      master: local[*]\n",
        f"      master: local[*]\n      config:\n        spark.driver.extraJavaOptions: {QUICK_JVM}\n"))
    first = _start(project, "fetchdf", "--json", "SHOW DATABASES")
    lock = project / ".meshbot" / "catalog.lock"
    deadline = time.monotonic() + 120
    while first.poll() is None and time.monotonic() < deadline and \
            (not lock.is_file() or lock.read_text().strip() != str(first.pid)):
        time.sleep(0.05)
    second = _start(project, "fetchdf", "--json", "SHOW DATABASES")
    done = [_finish(project, first), _finish(project, second)]
    assert [run.code for run in done] == [0, 0], "\n".join(run.out + run.err for run in done)
    assert not any("Traceback" in run.err or "SessionHiveMetaStoreClient" in run.err for run in done)
    assert json.loads(done[0].out) == json.loads(done[1].out)
    assert f"Waiting for meshbot (pid {first.pid}) to finish" in done[1].err
    assert lock.read_text().strip() == str(second.pid)   # the last holder's pid: the lock went with its process
