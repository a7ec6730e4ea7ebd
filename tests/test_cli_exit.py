"""How a `meshbot` process ends: exit codes, everything it printed, its caches and its exit handlers.

Commands that start no JVM end without freeing their objects one by one (bot/cli/app.py, `_exit`); these
run real processes through pipes to check that nothing a user or a script reads is lost that way.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bot.project.example import write_example

ROOT = Path(__file__).resolve().parent.parent


def _meshbot(*args: str, code: str = "") -> subprocess.CompletedProcess:
    """`python -m bot ARGS` in a fresh interpreter; `code` runs first (a probe registering exit handlers)."""
    program = f"{code}\nimport sys\nsys.argv = ['meshbot', *{list(args)!r}]\nfrom bot.cli import main\nmain()\n"
    return subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def shop(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("exit") / "shop"
    write_example(root)
    return root


def test_a_plan_prints_all_its_json_through_a_pipe_and_writes_its_cache(shop):
    done = _meshbot("-p", str(shop), "plan", "--explain", "--json")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert {model["name"] for model in plan["models"]} >= {"shop.orders", "shop.customers"}, plan
    cached = json.loads((shop / ".meshbot" / "cache" / "models.json").read_text())
    assert cached, "the parse cache was not written before the process ended"


def test_exit_handlers_run_and_the_last_line_is_flushed(shop, tmp_path):
    marker = tmp_path / "handler-ran"
    probe = (f"import atexit, pathlib\n"
             f"atexit.register(lambda: pathlib.Path({str(marker)!r}).write_text('yes'))")
    done = _meshbot("-p", str(shop), "plan", "--explain", code=probe)
    assert done.returncode == 0, done.stderr
    assert marker.read_text() == "yes"
    assert done.stdout.rstrip().splitlines(), "the plan printed nothing"


def test_a_refused_command_exits_1_with_its_message(shop, tmp_path):
    broken = tmp_path / "broken"
    write_example(broken)
    (broken / "models" / "odd.sql").write_text("MODEL (name shop.odd, kind FULL);\n\nSELECT FROM WHERE\n")
    done = _meshbot("-p", str(broken), "plan", "--explain")
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "models/odd.sql" in done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_a_bad_flag_exits_2_with_clicks_usage(shop):
    done = _meshbot("-p", str(shop), "plan", "--no-such-flag")
    assert done.returncode == 2
    # click 8.4 quotes the flag ("No such option '--no-such-flag'"), 8.2 and 8.3 put a colon before it
    assert "Usage: meshbot plan" in done.stderr
    assert re.search(r"No such option(: | ')--no-such-flag", done.stderr), done.stderr


def test_a_reader_that_left_gets_no_traceback(shop):
    program = ("import sys\nsys.argv = ['meshbot', '-p', sys.argv[1], 'plan', '--explain', '--json']\n"
               "from bot.cli import main\nmain()\n")
    reader, writer = os.pipe()
    os.close(reader)        # as `| head -c 10` has, by the time the plan prints
    try:
        done = subprocess.run([sys.executable, "-c", program, str(shop)], cwd=ROOT, stdout=writer,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(writer)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr


def test_output_that_cannot_be_written_fails_a_successful_command(shop):
    """A full disk: the plan's text is lost, so the exit code says so (120, as Python's own exit would)."""
    program = ("import sys\nsys.argv = ['meshbot', '-p', sys.argv[1], 'plan', '--explain']\n"
               "from bot.cli import main\nmain()\n")
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-c", program, str(shop)], cwd=ROOT, stdout=full,
                              stderr=subprocess.PIPE, text=True, timeout=120, env={**os.environ, "PYTHONUNBUFFERED": ""})
    assert done.returncode == 120, done.stderr
    assert "could not write the output" in done.stderr and "Traceback" not in done.stderr


def test_a_closed_standard_output_is_no_crash(shop):
    program = ("import sys\nsys.argv = ['meshbot', '-p', sys.argv[1], 'plan', '--explain']\n"
               "from bot.cli import main\nmain()\n")
    done = subprocess.run(["bash", "-c", f'"{sys.executable}" -c "$0" "$1" >&-', program, str(shop)], cwd=ROOT,
                          stderr=subprocess.PIPE, text=True, timeout=120)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr


def test_help_exits_0():
    done = _meshbot("--help")
    assert done.returncode == 0 and "Usage: meshbot" in done.stdout
