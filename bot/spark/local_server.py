"""The warm local engine: one Spark Connect server per project, started in the background by the first
command that needs local Spark and attached to by the commands after it.

The server runs as two processes in a session of their own (a CLI killed mid-command never takes it
along): a small Python watchdog (`python -m bot.spark.watchdog ENGINE_DIR IDLE_SECONDS`) and, as its
child, the Spark Connect server JVM from the installed PySpark, listening on 127.0.0.1 with the warehouse,
Derby metastore and settings the in-process local session would have (so tables made before stay
visible). Everything lives in `.meshbot/engine/`:

- `server.json`   the record: watchdog pid, port, settings digest, start time, state folder; plain JSON,
                  checked field by field on read (never code: no pickle).
- `server.properties`  the JVM's settings (mode 0600: they may hold credentials, so never on a command line).
- `server.log`    the JVM's output.
- `start.lock`    held (flock) while a command checks, starts or stops the server: two commands at once
                  start one server; the second waits and attaches.
- `query.sock`    `fetchdf` rows from the watchdog's own Connect session (bot.spark.query_service).
- `clients.lock`  each attached command holds it shared for its whole life; the watchdog stops the
                  server after `idle` seconds in which it could take it exclusively (and `last_used`,
                  touched on every attach, is as old).

A record whose watchdog is dead, whose port does not answer within the start timeout, whose settings
digest differs or that names another state folder (a copied project) is replaced; a server found
running for this folder is stopped first, since the Derby metastore admits one JVM at a time.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterator, Mapping

from bot.errors import EngineError

WARM_VARIABLE = "MESHBOT_WARM_ENGINE"   # `0` (false, no, off): Spark in each command's own process
ENGINE_DIR = "engine"
RECORD = "server.json"
PROPERTIES = "server.properties"
LOG = "server.log"
START_LOCK = "start.lock"
CLIENTS_LOCK = "clients.lock"
LAST_USED = "last_used"
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
WATCHDOG = "bot.spark.watchdog"   # the module the watchdog runs as (its command line names it)
START_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 30.0
_HELD: dict[Path, object] = {}   # engine folder -> this process's shared hold on its clients.lock (open until exit)


@dataclass(frozen=True)
class ServerRecord:
    """What `server.json` says about the running server."""

    pid: int          # the watchdog: leader of the server's process group
    port: int
    digest: str       # of the settings it was started with (`settings_digest`)
    started: float    # epoch seconds
    state_dir: str    # the `.meshbot` folder it serves

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"


def warm_wanted(master: str, remote: str | None, setting: bool, environ: Mapping[str, str] = os.environ) -> bool:
    """Whether a gateway's Spark runs on the warm engine: local masters only, unless the setting or
    MESHBOT_WARM_ENGINE turns it off.

    >>> warm_wanted("local[*]", None, True, {}), warm_wanted("spark://h:7077", None, True, {})
    (True, False)
    >>> warm_wanted("local", None, False, {}), warm_wanted("local[2]", None, True, {WARM_VARIABLE: "0"})
    (False, False)
    """
    if remote or not master.startswith("local"):
        return False
    variable = environ.get(WARM_VARIABLE, "").strip().lower()
    if variable in ("0", "false", "no", "off"):
        return False
    return setting


def settings_digest(master: str, settings: dict[str, str], idle_s: float) -> str:
    """A digest of everything a running server was started with: a change means a restart.

    >>> settings_digest("local[*]", {"a": "1"}, 60) == settings_digest("local[*]", {"a": "1"}, 60)
    True
    >>> settings_digest("local[*]", {"a": "1"}, 60) == settings_digest("local[*]", {"a": "2"}, 60)
    False
    """
    # the environment, not the interpreter's name: `meshbot` runs `.venv/bin/python3`, `python -m bot` maybe `python`
    payload = {"master": master, "settings": sorted(settings.items()), "idle_s": idle_s,
               "python": sys.prefix, "spark_home": str(spark_home())}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:32]


def spark_home() -> Path:
    """SPARK_HOME, or the installed pyspark package (the wheel carries bin/ and jars/), found without importing it."""
    if os.environ.get("SPARK_HOME"):
        return Path(os.environ["SPARK_HOME"])
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    locations = list(spec.submodule_search_locations or ()) if spec is not None else []
    if not locations:
        raise EngineError("the warm local engine needs the full PySpark: pip install 'meshbot[spark]'")
    return Path(locations[0])


# -------------------------------------------------------------------------------- the record
def read_record(engine_dir: Path) -> ServerRecord | None:
    """The record, or None when absent or not a well-formed record (a half-written or foreign file)."""
    try:
        raw = json.loads((engine_dir / RECORD).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(raw, dict):
        return None
    kinds = {"pid": int, "port": int, "digest": str, "started": (int, float), "state_dir": str}
    if any(not isinstance(raw.get(key), kind) or isinstance(raw.get(key), bool) for key, kind in kinds.items()):
        return None
    if raw["pid"] <= 1 or not 0 < raw["port"] < 65536:
        return None
    return ServerRecord(pid=raw["pid"], port=raw["port"], digest=raw["digest"], started=float(raw["started"]),
                        state_dir=raw["state_dir"])


def _write_record(engine_dir: Path, record: ServerRecord) -> None:
    temporary = engine_dir / f"{RECORD}.{os.getpid()}.tmp"
    temporary.write_text(json.dumps(asdict(record), indent=1) + "\n")
    os.replace(temporary, engine_dir / RECORD)   # readers see the old record or the new one, never half


def _remove_record(engine_dir: Path, pid: int | None = None) -> None:
    """Remove the record (when `pid` is given: only if it still names that watchdog)."""
    if pid is not None:
        record = read_record(engine_dir)
        if record is None or record.pid != pid:
            return
    with contextlib.suppress(FileNotFoundError):
        (engine_dir / RECORD).unlink()


@contextlib.contextmanager
def _locked(path: Path, *, shared: bool = False, wait: bool = True) -> Iterator[bool]:
    """flock `path`; yields False (without the lock) when `wait` is off and another process holds it."""
    handle = open(path, "a+")
    try:
        flags = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | (0 if wait else fcntl.LOCK_NB)
        try:
            fcntl.flock(handle, flags)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        handle.close()   # releases the lock


# -------------------------------------------------------------------------------- processes
def _alive(pid: int) -> bool:
    with contextlib.suppress(ChildProcessError, OSError):
        done, _ = os.waitpid(pid, os.WNOHANG)   # a child of this process that ended: reap it (no zombie)
        if done == pid:
            return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        pass
    try:
        return subprocess.run(["ps", "-ww", "-o", "args=", "-p", str(pid)], capture_output=True, text=True,
                              timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return ""


def _processes_of(engine_dir: Path) -> list[int]:
    """Pids of the watchdog and JVM serving `engine_dir` (their command lines name its files)."""
    try:
        listing = subprocess.run(["ps", "-ww", "-eo", "pid=,args="], capture_output=True, text=True,
                                 timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    # whole words: another project's folder may end with this one's path
    marks = (f" {engine_dir / PROPERTIES} ", f" {WATCHDOG} {engine_dir} ")
    found = []
    for line in listing.splitlines():
        pid, _, args = line.strip().partition(" ")
        if pid.isdigit() and int(pid) != os.getpid() and any(mark in f" {args} " for mark in marks):
            found.append(int(pid))
    return found


def _ours(record: ServerRecord, engine_dir: Path) -> bool:
    """The record's watchdog is alive and is the one serving `engine_dir` (not a reused pid)."""
    return _alive(record.pid) and f" {WATCHDOG} {engine_dir} " in f" {_command_line(record.pid)} "


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _terminate(engine_dir: Path, pid: int | None) -> None:
    """Stop the server serving `engine_dir`: its process group (SIGTERM, then SIGKILL), and any process
    still naming its files (a JVM whose watchdog was killed), until all are gone."""
    pids = set(_processes_of(engine_dir)) | ({pid} if pid else set())
    for signum in (signal.SIGTERM, signal.SIGKILL):
        for target in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if target == pid:
                    os.killpg(target, signum)
                os.kill(target, signum)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while time.monotonic() < deadline:
            pids = {target for target in pids if _alive(target)}
            if not pids:
                return
            time.sleep(0.1)


# -------------------------------------------------------------------------------- attach, start, stop
def attach(state_dir: Path, *, master: str, settings: dict[str, str], idle_s: float,
           notice: Callable[[str], None] | None = None) -> tuple[ServerRecord, bool]:
    """The running server for `state_dir` with these settings, started (or restarted) when needed:
    (record, whether this call started it). This process then counts as a client until it exits."""
    engine_dir = state_dir / ENGINE_DIR
    digest = settings_digest(master, settings, idle_s)
    try:
        engine_dir.mkdir(parents=True, exist_ok=True)
        _refuse_symlinks(engine_dir)
        with _locked(engine_dir / START_LOCK):
            record = read_record(engine_dir)
            if record is not None and record.state_dir == str(state_dir) and record.digest == digest \
                    and _ours(record, engine_dir) and _wait_ready(record, engine_dir):
                hold_client(engine_dir)
                return record, False
            if record is not None and record.state_dir == str(state_dir):
                _terminate(engine_dir, record.pid if _ours(record, engine_dir) else None)
            else:
                _terminate(engine_dir, None)   # a JVM left without a record would hold the metastore
            _remove_record(engine_dir)
            if notice is not None:
                notice(f"Starting the local Spark engine in the background (log: {engine_dir / LOG}); "
                       "later commands attach to it")
            record = _start(engine_dir, state_dir, master, settings, idle_s, digest)
            hold_client(engine_dir)
            return record, True
    except OSError as exc:
        raise EngineError(f"could not start the local Spark engine in {engine_dir}: {exc.strerror or exc}") from None


def _wait_ready(record: ServerRecord, engine_dir: Path) -> bool:
    """Wait (up to the start timeout from its start) until the record's server answers; False if it never does."""
    deadline = record.started + START_TIMEOUT_S
    while True:
        if _answers(record.port):
            return True
        if time.time() > deadline or not _alive(record.pid):
            return False
        time.sleep(0.2)


def _start(engine_dir: Path, state_dir: Path, master: str, settings: dict[str, str], idle_s: float,
           digest: str) -> ServerRecord:
    port = _free_port()
    conf = {**settings, "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(port), "spark.app.name": "meshbot-engine"}
    properties = engine_dir / PROPERTIES
    descriptor = os.open(properties, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        out.writelines(f"{key}={_escape(value)}\n" for key, value in sorted(conf.items()))
    env = dict(os.environ, SPARK_HOME=str(spark_home()), PYSPARK_PYTHON=os.environ.get("PYSPARK_PYTHON",
                                                                                       sys.executable))
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with open(engine_dir / LOG, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", WATCHDOG, str(engine_dir), str(idle_s), master, str(port)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, start_new_session=True,
            cwd=str(state_dir))
    record = ServerRecord(pid=process.pid, port=port, digest=digest, started=time.time(),
                          state_dir=str(state_dir))
    _write_record(engine_dir, record)   # before it is ready: a command killed now leaves a findable server
    if not _wait_ready(record, engine_dir):
        tail = _log_tail(engine_dir / LOG)
        _terminate(engine_dir, record.pid)
        _remove_record(engine_dir)
        raise EngineError("could not start the local Spark engine (Spark Connect on 127.0.0.1): it "
                          f"{'did not answer in time' if _alive(record.pid) else 'exited'}"
                          + (f"\nits output ({engine_dir / LOG}):\n{tail}" if tail else ""))
    return record


def _escape(value: str) -> str:
    r"""A value as Java's Properties.load reads it back.

    >>> _escape(" -Da=b\\c\n")
    '\\ -Da=b\\\\c\\n'
    """
    text = value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    return "\\" + text if text.startswith((" ", "\t")) else text


def _log_tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    kept = [line for line in text.splitlines() if line.strip() and "Using incubator modules" not in line]
    return "\n".join(kept[-lines:])


def _refuse_symlinks(engine_dir: Path) -> None:
    """Refuse to write through a symlink in `.meshbot/engine/` (a checkout's files are hostile input;
    `.meshbot/engine` itself is checked with the rest of `.meshbot/`, bot.project.meshbot_dir)."""
    if engine_dir.is_symlink():
        raise EngineError(f"`{engine_dir}` is a symlink: meshbot follows no symlink under .meshbot/; remove it")
    for entry in os.scandir(engine_dir):
        if entry.is_symlink():
            raise EngineError(f"`{entry.path}` is a symlink: meshbot follows no symlink under .meshbot/; remove it")


def hold_client(engine_dir: Path) -> None:
    """Count this process as a client until it exits: a shared hold on clients.lock, and last_used touched."""
    (engine_dir / LAST_USED).touch()
    if engine_dir not in _HELD:
        handle = open(engine_dir / CLIENTS_LOCK, "a+")
        fcntl.flock(handle, fcntl.LOCK_SH)
        _HELD[engine_dir] = handle


def status(state_dir: Path) -> ServerRecord | None:
    """The running server's record, or None when none serves `state_dir`."""
    engine_dir = state_dir / ENGINE_DIR
    record = read_record(engine_dir)
    if record is None or record.state_dir != str(state_dir) or not _ours(record, engine_dir):
        return None
    return record


def stop(state_dir: Path) -> ServerRecord | None:
    """Stop the server serving `state_dir` (waiting for commands that are starting one); the record of the
    one stopped, or None when none was running. Leftover processes are stopped as well."""
    engine_dir = state_dir / ENGINE_DIR
    if not engine_dir.is_dir():
        return None
    _refuse_symlinks(engine_dir)
    try:
        with _locked(engine_dir / START_LOCK):
            record = read_record(engine_dir)
            running = record if record is not None and record.state_dir == str(state_dir) \
                and _ours(record, engine_dir) else None
            _terminate(engine_dir, running.pid if running else None)
            _remove_record(engine_dir)
            return running
    except OSError as exc:
        raise EngineError(f"could not stop the local Spark engine in {engine_dir}: {exc.strerror or exc}") from None
