"""A real `meshbot` process prints only meshbot's own lines; `-v` lets Spark's JVM speak again."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.project.example import write_example
from spark_servers import JVM_LINES

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.spark   # each test starts Spark in a meshbot subprocess

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
    """Two JVMs start side by side: a failing query at default verbosity, and `-v`. (A successful
    `plan --auto-apply` with a local driver is checked for JVM lines in test_spark_connect.)"""
    quiet, loud = tmp_path / "quiet", tmp_path / "loud"
    for project in (quiet, loud):
        write_example(project)
    error = _start(quiet, "fetchdf", "SELECT no_such_column FROM (SELECT 1 AS one)")
    verbose = _start(loud, "fetchdf", "--json", "SELECT 1 AS one", verbose=True)

    # An analysis error is still reported, once, as meshbot's own error, and nothing else is printed.
    code, out, err = _finish(error)
    assert code == 1, f"{out}\n{err}"
    assert "Error: running query: [UNRESOLVED_COLUMN" in out + err
    assert (out + err).count("no_such_column") == 1
    assert not JVM_LINES.search(out + err), f"JVM output reached the terminal:\n{out}\n{err}"
    assert (quiet / ".meshbot" / "spark.log").is_file()   # where the JVM's own streams went

    code, out, err = _finish(verbose)
    assert code == 0, f"{out}\n{err}"
    assert '"one": 1' in out
    assert "Using Spark's default log4j profile" in err
    assert "Setting default log level" in err
    assert "NativeCodeLoader" in err
