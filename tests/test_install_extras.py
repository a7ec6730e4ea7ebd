"""The pip extras: `meshbot[connect]` (the Spark Connect client alone) and `meshbot[spark]` (the full PySpark).

A gateway the installed PySpark cannot run fails at once naming the extra to install. The installs are
played with the real PySpark of this environment laid out as pyspark-client lays it out (PySpark's Python
code without its jars, launch scripts, RDD core and classic SQL, and without py4j), or with no PySpark at
all, on the path of a `python -S` subprocess: the detection reads the real files, and the Connect case
runs a real command through a real Spark Connect server with PySpark's jars and py4j out of reach.
"""

from __future__ import annotations

import os
import subprocess
import tomllib
from pathlib import Path

import pytest

from bot.errors import EngineError
from bot.project.config import SparkConnection
from bot.project.example import write_example
from bot.spark.session import CONNECT_EXTRA, SPARK_EXTRA, PySparkInstall, pyspark_install, require_pyspark
from spark_servers import PYTHON, ROOT, SPARK_HOME, free_port

SITE_PACKAGES = SPARK_HOME.parent
# What the pyspark wheel has and the pyspark-client sdist leaves out (compared file by file, 4.x).
CLIENT_LEAVES_OUT = {"bin", "sbin", "jars", "core", "data", "examples", "licenses", "python", "pipelines",
                     "sql/classic"}


def _mirror(source: Path, target: Path, leave_out: set[str], prefix: str = "") -> None:
    """`target` as symbolic links to `source`'s entries, without the relative paths in `leave_out`."""
    target.mkdir(parents=True)
    nested = {path.split("/", 1)[0] for path in leave_out if "/" in path}
    for entry in source.iterdir():
        relative = f"{prefix}{entry.name}"
        if relative in leave_out or entry.name == "__pycache__":
            continue
        if entry.name in nested and entry.is_dir():
            inner = {path.split("/", 1)[1] for path in leave_out if path.startswith(f"{entry.name}/")}
            _mirror(entry, target / entry.name, inner)
        else:
            (target / entry.name).symlink_to(entry)


def _site(directory: Path, *, pyspark: str) -> Path:
    """This environment's site-packages without py4j and with `pyspark` as `client` or `none`."""
    site = directory / "site-packages"
    _mirror(SITE_PACKAGES, site, set())
    for entry in site.iterdir():
        if entry.name.startswith(("pyspark", "py4j")):
            entry.unlink()
    if pyspark == "client":
        _mirror(SPARK_HOME, site / "pyspark", CLIENT_LEAVES_OUT)
    return site


def _project(directory: Path, connection: str) -> Path:
    """The bundled example (no Python model: one imports pyspark to load) with the gateway's connection replaced."""
    write_example(directory)
    config = directory / "config.yaml"
    text = config.read_text()
    assert "      master: local[*]\n" in text
    config.write_text(text.replace("      master: local[*]\n", connection))
    return directory


def _run(site: Path, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """`python -S` (no site-packages of its own) with only `site` and the checkout on the path."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("SPARK_", "PYSPARK_", "PYTHON"))}
    env["PYTHONPATH"] = f"{site}{os.pathsep}{ROOT}"
    return subprocess.run([str(PYTHON), "-S", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def _install(site: Path) -> PySparkInstall:
    result = _run(site, "-c", "from bot.spark.session import pyspark_install; i = pyspark_install(); "
                              "print(i.classic, i.connect, i.location is not None)")
    assert result.returncode == 0, result.stderr
    classic, connect, found = result.stdout.split()
    return PySparkInstall(location=Path("found") if found == "True" else None,
                          classic=classic == "True", connect=connect == "True")


# --------------------------------------------------------------------------------------------
# What is installed
# --------------------------------------------------------------------------------------------

def test_the_full_pyspark_runs_both_kinds_of_gateway():
    install = pyspark_install()
    assert install.classic and install.connect and install.location == SPARK_HOME
    require_pyspark(SparkConnection(master="local[*]"), install)
    require_pyspark(SparkConnection(remote="sc://127.0.0.1:15002"), install)


def test_detection_reads_the_client_layout_and_a_missing_pyspark(tmp_path):
    client = _install(_site(tmp_path / "client", pyspark="client"))
    assert (client.classic, client.connect, client.location is not None) == (False, True, True)
    none = _install(_site(tmp_path / "none", pyspark="none"))
    assert (none.classic, none.connect, none.location) == (False, False, None)


def test_the_extras_are_declared_as_the_errors_name_them():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any(dep.startswith("pyspark") for dep in project["dependencies"])
    extras = project["optional-dependencies"]
    assert CONNECT_EXTRA == "meshbot[connect]" and SPARK_EXTRA == "meshbot[spark]"
    assert [dep for dep in extras["connect"] if "spark" in dep] == ["pyspark-client>=4.0,<5"]
    assert [dep for dep in extras["spark"] if "spark" in dep] == ["pyspark[connect]>=4.0,<5"]
    assert SPARK_EXTRA in extras["test"]   # the tests start local Spark, Connect servers and a cluster


def test_pyspark_without_its_connect_dependencies_names_what_is_missing():
    install = PySparkInstall(location=SPARK_HOME, classic=True, connect=False, missing_connect_modules=("grpc",))
    with pytest.raises(EngineError, match=r"lacks grpc; install it with: pip install 'meshbot\[connect\]'"):
        require_pyspark(SparkConnection(remote="sc://127.0.0.1:15002"), install)
    require_pyspark(SparkConnection(master="local[*]"), install)


# --------------------------------------------------------------------------------------------
# The meshbot CLI on each layout
# --------------------------------------------------------------------------------------------

def test_a_local_master_with_the_connect_client_alone_names_the_spark_extra(tmp_path):
    site = _site(tmp_path / "env", pyspark="client")
    project = _project(tmp_path / "shop", "      master: local[*]\n")
    result = _run(site, "-m", "bot", "-p", str(project), "fetchdf", "SELECT 1")
    assert result.returncode == 1, result.stdout + result.stderr
    assert ("the gateway runs Spark in this process (master `local[*]`), which needs the full PySpark with "
            "Spark's jars, but only the Spark Connect client (pyspark-client) is installed") in result.stderr
    assert "install the full one with: pip install 'meshbot[spark]'" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (project / ".meshbot" / "metastore_db").exists()   # no JVM was tried


@pytest.mark.parametrize("connection, extra", [
    ("      master: local[*]\n", "meshbot[spark]"),
    ("      remote: sc://127.0.0.1:{port}\n", "meshbot[connect]"),
])
def test_without_pyspark_the_error_names_the_extra_the_gateway_needs(tmp_path, connection, extra):
    site = _site(tmp_path / "env", pyspark="none")
    project = _project(tmp_path / "shop", connection.format(port=free_port()))
    result = _run(site, "-m", "bot", "-p", str(project), "fetchdf", "SELECT 1")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "PySpark is not installed" in result.stderr
    assert f"pip install '{extra}'" in result.stderr
    assert "Traceback" not in result.stderr
    # The commands that need no Spark run without PySpark.
    info = _run(site, "-m", "bot", "-p", str(project), "plan", "--explain")
    assert info.returncode == 0, info.stdout + info.stderr


@pytest.mark.spark   # a Spark Connect server and a meshbot subprocess
def test_the_connect_client_alone_runs_a_command_through_spark_connect(connect_server, tmp_path):
    site = _site(tmp_path / "env", pyspark="client")
    project = _project(tmp_path / "shop", f"      remote: {connect_server.url}\n")
    result = _run(site, "-m", "bot", "-p", str(project), "fetchdf", "--json",
                  "SELECT 40 + 2 AS answer, current_database() AS db")
    assert result.returncode == 0, result.stdout + result.stderr
    assert '"answer": 42' in result.stdout
