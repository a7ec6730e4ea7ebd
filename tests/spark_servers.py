"""Spark processes the tests start from the installed pyspark: a Spark Connect server, a standalone
master with one worker. Each runs in its own process group and is always stopped."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYTHON = Path(sys.executable)
SPARK_HOME = Path(__import__("pyspark").__file__).parent
LOG4J = ROOT / "bot" / "spark" / "log4j2.properties"
START_TIMEOUT = 240.0
# For the standalone cluster's JVMs, which live briefly and run tiny queries: the client compiler alone
# spares them C2's compile threads on two cores (C2 pays off in long-lived JVMs such as the run's own
# session and the Connect server, which keep the defaults; the suite ran 7% slower with C1 everywhere).
QUICK_JVM = "-XX:TieredStopAtLevel=1"
# The tests' Connect server lives for the whole run: C1 alone as well (the same wall time as C2 over the
# Connect modules, 40 s less CPU for the other test process), with the code cache C2 would have: with
# C1's default 48 MB it fills within a minute of queries and HotSpot stops compiling altogether.
CONNECT_TEST_JVM = f"{QUICK_JVM} -XX:ReservedCodeCacheSize=240m"

# What the JVM, log4j and PySpark print when nobody stops them.
JVM_LINES = re.compile(
    r"Using incubator modules|Picked up (_|JDK_)?JAVA(_TOOL)?_OPTIONS|Setting default log level|To adjust logging level"
    r"|Using Spark's default log4j profile|NativeCodeLoader|SQLQueryContextLogger|\"logger\":"
    r"|^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (INFO|WARN|ERROR) |^\d\d:\d\d:\d\d (INFO|WARN|ERROR) ", re.MULTILINE)


@dataclass(frozen=True)
class Server:
    """A Spark process group this module started: where it listens and where it writes."""

    process: subprocess.Popen
    directory: Path
    url: str

    def log(self) -> str:
        text = "".join(path.read_text(errors="replace") for path in sorted(self.directory.glob("*.log")))
        return text[-4000:]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def spark_env(directory: Path, *, daemon_java_opts: str = QUICK_JVM) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("SPARK_", "PYSPARK_"))}
    conf_dir = directory / "conf"
    conf_dir.mkdir(exist_ok=True)
    env.update(SPARK_HOME=str(SPARK_HOME), SPARK_CONF_DIR=str(conf_dir), SPARK_LOCAL_IP="127.0.0.1",
               PYSPARK_PYTHON=str(PYTHON), SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
               SPARK_DAEMON_JAVA_OPTS=daemon_java_opts)
    return env


def spawn(script: str, directory: Path, *, daemon_java_opts: str = QUICK_JVM) -> subprocess.Popen:
    """Run `script` in bash in its own process group (killed as a whole at the end)."""
    return subprocess.Popen(["bash", "-c", script], cwd=directory,
                            env=spark_env(directory, daemon_java_opts=daemon_java_opts),
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def start_connect(directory: Path, *, java_options: str = CONNECT_TEST_JVM) -> Server:
    """Spark Connect server on a free port, with its own warehouse and Derby metastore in `directory`
    (`java_options` for its JVM: spark-submit hands it SPARK_DAEMON_JAVA_OPTS; "" keeps the JVM's defaults)."""
    port = free_port()
    confs = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.sql.warehouse.dir": str(directory / "warehouse"),
        "spark.sql.catalogImplementation": "hive",
        "spark.hadoop.javax.jdo.option.ConnectionURL":
            f"jdbc:derby:;databaseName={directory / 'metastore_db'};create=true",
        "spark.hadoop.datanucleus.schema.autoCreateAll": "true",
        "spark.hadoop.hive.metastore.schema.verification": "false",
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={directory} -Dlog4j2.configurationFile=file:{LOG4J}",
    }
    args = " ".join(f"--conf '{key}={value}'" for key, value in confs.items())
    script = (f"exec '{SPARK_HOME}/bin/spark-submit' --master 'local[2]' --name meshbot-connect-test "
              f"--class org.apache.spark.sql.connect.service.SparkConnectServer {args} > connect.log 2>&1")
    return Server(process=spawn(script, directory, daemon_java_opts=java_options), directory=directory,
                  url=f"sc://127.0.0.1:{port}")


def start_standalone(directory: Path) -> Server:
    """A standalone master and one worker (1 core, 1 GiB) from the installed pyspark's jars."""
    port = free_port()
    master = f"spark://127.0.0.1:{port}"
    spark_class = f"'{SPARK_HOME}/bin/spark-class'"
    script = (
        f"{spark_class} org.apache.spark.deploy.master.Master --host 127.0.0.1 --port {port} "
        f"--webui-port {free_port()} > master.log 2>&1 &\n"
        # A worker that finds no master yet retries only after several seconds: start it on a live master.
        "until grep -qs 'New state: ALIVE' master.log; do sleep 0.2; done\n"
        f"{spark_class} org.apache.spark.deploy.worker.Worker {master} --host 127.0.0.1 --cores 1 "
        f"--memory 1g --work-dir '{directory / 'work'}' --webui-port {free_port()} > worker.log 2>&1 &\n"
        "wait\n")
    return Server(process=spawn(script, directory), directory=directory, url=master)


def wait_until(server: Server, ready, what: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if ready():
            return
        if server.process.poll() is not None:
            break
        time.sleep(0.5)
    pytest.fail(f"{what} did not start (exit code {server.process.poll()}):\n{server.log()}")


def stop(server: Server) -> None:
    try:
        os.killpg(server.process.pid, signal.SIGTERM)
        server.process.wait(timeout=20)
    except ProcessLookupError:
        return
    except subprocess.TimeoutExpired:
        os.killpg(server.process.pid, signal.SIGKILL)
        server.process.wait(timeout=20)


def wait_for_connect(server: Server) -> Server:
    """Block until the Connect server accepts connections (or fail the test with its log)."""
    from bot.errors import EngineError
    from bot.spark.connect import check_reachable

    def listening() -> bool:
        try:
            check_reachable(server.url, timeout=1)
            return True
        except EngineError:
            return False

    wait_until(server, listening, "Spark Connect server")
    return server
