"""A real `meshbot` process prints only meshbot's own lines; `-v` lets Spark's JVM speak again."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bot.project.example import write_example

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.spark   # each test starts Spark in a meshbot subprocess

# What the JVM, log4j and PySpark print when nobody stops them.
JVM_LINES = re.compile(
    r"Using incubator modules|Picked up (_)?JAVA(_TOOL)?_OPTIONS|Setting default log level|To adjust logging level"
    r"|Using Spark's default log4j profile|NativeCodeLoader|SQLQueryContextLogger|\"logger\":"
    r"|^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (INFO|WARN|ERROR) |^\d\d:\d\d:\d\d (INFO|WARN|ERROR) ", re.MULTILINE)


def _env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("SPARK_", "PYSPARK_"))}
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    return env


def _start(project: Path, *args: str, verbose: bool = False) -> subprocess.Popen:
    options = ["-v"] if verbose else []
    return subprocess.Popen([sys.executable, "-m", "bot", *options, "-p", str(project), *args], cwd=ROOT,
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(process: subprocess.Popen) -> tuple[int, str, str]:
    try:
        out, err = process.communicate(timeout=400)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
    return process.returncode, out, err


def test_default_output_has_no_jvm_lines_and_verbose_restores_them(tmp_path):
    quiet, failing, loud = tmp_path / "quiet", tmp_path / "failing", tmp_path / "loud"
    for project in (quiet, failing, loud):
        write_example(project)
    # One project each (each has its own Derby metastore), so the three JVMs start at the same time.
    plan = _start(quiet, "plan", "--auto-apply", "--execution-time", "2024-01-10")
    error = _start(failing, "fetchdf", "SELECT no_such_column FROM (SELECT 1 AS one)")
    verbose = _start(loud, "fetchdf", "--json", "SELECT 1 AS one", verbose=True)

    code, out, err = _finish(plan)
    assert code == 0, f"{out}\n{err}"
    assert "Environment `prod` updated: 6 batch(es) evaluated" in out
    assert not JVM_LINES.search(out + err), f"JVM output reached the terminal:\n{out}\n{err}"
    assert err == ""
    assert (quiet / ".meshbot" / "spark.log").is_file()   # where the JVM's own streams went

    # An analysis error is still reported, once, as meshbot's own error.
    code, out, err = _finish(error)
    assert code == 1, f"{out}\n{err}"
    assert "Error: running query: [UNRESOLVED_COLUMN" in out + err
    assert (out + err).count("no_such_column") == 1
    assert not JVM_LINES.search(out + err), f"JVM output reached the terminal:\n{out}\n{err}"

    code, out, err = _finish(verbose)
    assert code == 0, f"{out}\n{err}"
    assert '"one": 1' in out
    assert "Using Spark's default log4j profile" in err
    assert "Setting default log level" in err
    assert "NativeCodeLoader" in err
