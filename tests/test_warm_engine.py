"""The warm local engine: the first meshbot command on a local gateway starts a Spark Connect server for
the project in the background; later commands attach to it, share it, replace it when it is dead or its
settings changed, and `meshbot engine stop` (or its idle timeout) ends it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from bot.project.example import write_example
from bot.spark.local_server import ENGINE_DIR, RECORD, WARM_VARIABLE, _processes_of, read_record
from bot.spark.local_server import stop as stop_engine
from bot.spark.query_service import SOCKET
from spark_servers import PYTHON, QUICK_JVM, ROOT

pytestmark = pytest.mark.spark


def _env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("SPARK_", "PYSPARK_"))}
    env.pop(WARM_VARIABLE, None)   # conftest turns the warm engine off for every other test
    return env


def _start(project: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([str(PYTHON), "-m", "bot", "-p", str(project), *args], cwd=ROOT, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(process: subprocess.Popen) -> tuple[str, str]:
    out, err = process.communicate(timeout=400)
    assert process.returncode == 0, f"meshbot {process.args[5:]} failed:\n{out}\n{err}"
    assert "Traceback" not in err
    return out, err


def _meshbot(project: Path, *args: str) -> tuple[str, str]:
    return _finish(_start(project, *args))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def project(tmp_path):
    """The example project (its engine's JVM on the client compiler alone, as the tests' other short-lived
    JVMs: spark_servers.QUICK_JVM); whatever engine a test leaves running is stopped."""
    write_example(tmp_path)
    config = tmp_path / "config.yaml"
    config.write_text(config.read_text().replace(
        "      master: local[*]\n",
        f"      master: local[*]\n      config:\n        spark.driver.extraJavaOptions: '{QUICK_JVM}'\n"))
    yield tmp_path
    stop_engine((tmp_path / ".meshbot").resolve())


def test_the_first_command_starts_the_engine_later_ones_attach_and_engine_stop_ends_it(project):
    engine_dir = (project / ".meshbot" / ENGINE_DIR).resolve()
    _, err = _meshbot(project, "plan", "--auto-apply")
    [start] = [line for line in err.splitlines() if line.startswith("Starting Spark")]
    assert start.startswith("Starting Spark (local, warm engine") and " ... ready in " in start   # one line
    first = read_record(engine_dir)
    assert first is not None and _alive(first.pid)
    assert not (project / ".meshbot" / "spark.log").exists()   # no JVM in the command's own process

    deadline = time.monotonic() + 60   # the watchdog serves its query socket once the server answers
    while not (engine_dir / SOCKET).is_socket() and time.monotonic() < deadline:
        time.sleep(0.1)
    fetched = subprocess.run([str(PYTHON), "-X", "importtime", "-m", "bot", "-p", str(project), "fetchdf", "--json",
                              "select count(*) as n from shop.orders"], cwd=ROOT, env=_env(), capture_output=True,
                             text=True, timeout=120)
    assert fetched.returncode == 0, fetched.stderr[-2000:]
    assert json.loads(fetched.stdout) == [{"n": 37}]   # what the first command wrote, on the same server
    # through the watchdog's query socket: this command imported no PySpark and started nothing
    assert not re.search(r"\| +(pyspark|pandas)$", fetched.stderr, re.MULTILINE)
    assert "Starting" not in fetched.stderr
    assert read_record(engine_dir) == first

    out, _ = _meshbot(project, "engine", "status")
    assert f"pid {first.pid}, sc://127.0.0.1:{first.port}, up " in out

    # Spark inside the command cannot share the Derby catalog with the engine: one line, before a JVM starts.
    refused = subprocess.run([str(PYTHON), "-m", "bot", "-p", str(project), "fetchdf", "select 1"], cwd=ROOT,
                             env={**_env(), WARM_VARIABLE: "0"}, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    assert f"warm local Spark engine (pid {first.pid}" in refused.stderr
    assert not (project / ".meshbot" / "spark.log").exists()

    out, _ = _meshbot(project, "engine", "stop")
    assert f"Stopped the local Spark engine (pid {first.pid}" in out
    assert not _alive(first.pid) and not (engine_dir / RECORD).exists() and not _processes_of(engine_dir)
    out, _ = _meshbot(project, "engine", "status")
    assert "No local Spark engine is running" in out


def test_a_dead_record_is_replaced_commands_share_one_engine_and_a_changed_setting_restarts_it(project):
    engine_dir = (project / ".meshbot" / ENGINE_DIR).resolve()
    engine_dir.mkdir(parents=True)
    gone = subprocess.Popen(["true"])
    gone.wait()
    (engine_dir / RECORD).write_text(json.dumps({"pid": gone.pid, "port": 9, "digest": "old", "started": 0.0,
                                                 "state_dir": str(engine_dir.parent)}))

    # Two commands at once, on a record whose server is dead: one starts a server, both run on it.
    both = [_start(project, "fetchdf", "--json", f"select {n} as n") for n in (1, 2)]
    results = [_finish(process) for process in both]
    assert [json.loads(out) for out, _ in results] == [[{"n": 1}], [{"n": 2}]]
    assert sum("Starting Spark (local, warm engine" in err for _, err in results) == 1
    shared = read_record(engine_dir)
    assert shared is not None and shared.pid != gone.pid and _alive(shared.pid)
    assert len(_processes_of(engine_dir)) == 2   # one watchdog, one JVM

    # A changed setting restarts it; the command that restarted it is killed once the new server is
    # recorded, and the next command attaches to that server. Idle for 12 s, it stops by itself.
    config = project / "config.yaml"
    config.write_text(config.read_text().replace("      master: local[*]\n",
                                                 "      master: local[*]\n      warm_idle_minutes: 0.2\n"))
    assert "warm_idle_minutes" in config.read_text()
    killed = _start(project, "fetchdf", "select 3")
    deadline = time.monotonic() + 300
    while (record := read_record(engine_dir)) is None or record.pid == shared.pid:
        assert time.monotonic() < deadline and killed.poll() is None
        time.sleep(0.2)
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait()
    assert not _alive(shared.pid)
    out, err = _meshbot(project, "fetchdf", "--json", "select 4 as n")
    assert json.loads(out) == [{"n": 4}] and "Starting" not in err
    assert read_record(engine_dir) == record
    deadline = time.monotonic() + 120
    while _alive(record.pid) or (engine_dir / RECORD).exists():
        assert time.monotonic() < deadline, "the idle engine did not stop itself"
        time.sleep(0.5)
    assert not _processes_of(engine_dir)
