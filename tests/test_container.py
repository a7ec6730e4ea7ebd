"""The container image, checked without Docker.

Dockerfile: hadolint finds nothing; the `spark` and `connect` targets install the builder's wheel with
their extra and run as a non-root user; the image's entrypoint, the `meshbot` console script, runs init and
plan; the wheel built from only what the build context holds (.dockerignore) installs and runs.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest
import yaml

import bot
from bot.project.example import EXAMPLE_DIR

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
IMAGE_USER = "10001:10001"


def _tool(name: str) -> str:
    executable = BIN / name
    assert executable.exists(), f"{name} is missing: pip install -e '.[test]' (it is in the test extra)"
    return str(executable)


def _env(**extra: str) -> dict[str, str]:
    """This machine's environment without what would steer meshbot (GitHub, PySpark, meshbot settings)."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "MESHBOT_", "SPARK_", "PYSPARK_"))}
    return {**keep, **extra}


# --- Dockerfile ---------------------------------------------------------------------------------------

def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined and comments dropped."""
    logical, current = [], ""
    for line in text.splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            current += line[:-1] + " "
            continue
        logical.append(current + line)
        current = ""
    split = (line.split(None, 1) for line in logical)
    return [(parts[0].upper(), parts[1] if len(parts) > 1 else "") for parts in split]


def _stages() -> dict[str, list[tuple[str, str]]]:
    stages: dict[str, list[tuple[str, str]]] = {}
    for instruction, arguments in _instructions((ROOT / "Dockerfile").read_text()):
        if instruction == "FROM":
            name = arguments.split(" AS ")[-1].strip()
            stages[name] = [(instruction, arguments)]
        elif stages:
            stages[list(stages)[-1]].append((instruction, arguments))
    return stages


def _hadolint(path: Path) -> list[dict]:
    import json

    result = subprocess.run([_tool("hadolint"), "--config", str(ROOT / ".hadolint.yaml"), "--format", "json",
                             str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode in (0, 1), result.stderr   # 1: findings; anything else is hadolint failing
    return json.loads(result.stdout or "[]")


def test_hadolint_finds_nothing_in_the_dockerfile():
    """At every level (error, warning, info, style), with the reviewed ignore list of .hadolint.yaml."""
    assert [f"{f['line']} {f['code']} {f['message']}" for f in _hadolint(ROOT / "Dockerfile")] == []


def test_hadolint_really_lints_and_ignores_only_the_reviewed_rule(tmp_path):
    """The one ignored rule is DL3008 (apt versions; the reason is beside it), nothing is ignored inline, and
    the same run does report what it should: a pip install that keeps its cache."""
    config = yaml.safe_load((ROOT / ".hadolint.yaml").read_text())
    assert config == {"ignored": ["DL3008"]}
    assert "hadolint ignore" not in (ROOT / "Dockerfile").read_text()
    worse = tmp_path / "Dockerfile"
    worse.write_text((ROOT / "Dockerfile").read_text().replace(
        "pip install --no-cache-dir --requirement /dist/connect.txt", "pip install --requirement /dist/connect.txt"))
    assert [f["code"] for f in _hadolint(worse)] == ["DL3042"]


def test_two_targets_install_the_builders_wheel_with_their_extra_as_a_non_root_user():
    stages = _stages()
    assert list(stages) == ["builder", "runtime", "connect", "spark"], "spark last: the default target"
    [(_, image)] = [i for i in _instructions((ROOT / "Dockerfile").read_text()) if i[0] == "ARG"][:1]
    assert re.fullmatch(r"PYTHON_IMAGE=python:3\.11-slim-bookworm", image)
    assert all(s[0][1].startswith("${PYTHON_IMAGE} AS ") or s[0][1].startswith("runtime AS ")
               for s in stages.values())
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert ("ENTRYPOINT", '["meshbot"]') in stages["runtime"] and scripts == {"meshbot": "bot.cli:main"}
    for target in ("connect", "spark"):
        steps = stages[target]
        assert steps[0][1] == f"runtime AS {target}" and steps[-1] == ("USER", IMAGE_USER), target
        [install] = [a for i, a in steps if i == "RUN" and "pip install" in a]
        assert install.startswith("--mount=type=bind,from=builder,source=/dist,target=/dist ")
        assert f"pip install --no-cache-dir --requirement /dist/{target}.txt" in install
        assert not re.search(r"(^|\s)(-e|--editable)\s", install)
    spark_run = " ".join(a for i, a in stages["spark"] if i == "RUN")
    assert "apt-get install -y --no-install-recommends openjdk-17-jre-headless" in spark_run
    assert "apt-get" not in " ".join(a for _, a in stages["connect"]) and "java" not in str(stages["connect"])
    assert "useradd --uid 10001 --gid 10001" in " ".join(a for i, a in stages["runtime"] if i == "RUN")


def test_the_build_context_holds_exactly_what_the_builder_copies():
    """.dockerignore is an allowlist: everything out, then what the builder stage's COPY lines name."""
    copied = {source.rstrip("/") for i, a in _stages()["builder"] if i == "COPY" for source in a.split()[:-1]}
    lines = [line for line in (ROOT / ".dockerignore").read_text().splitlines() if line and not line.startswith("#")]
    assert lines[0] == "*"
    assert {line[1:].rstrip("/") for line in lines if line.startswith("!")} == copied
    assert {"**/__pycache__", "**/.meshbot"} <= set(lines)


def test_the_images_entrypoint_answers_help_version_init_and_plan(tmp_path):
    """`meshbot`, the console script the image's ENTRYPOINT runs (here this environment's), in a fresh folder."""
    meshbot = _tool("meshbot")

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([meshbot, *args], cwd=tmp_path, env=_env(), capture_output=True, text=True,
                              timeout=120)

    shown = run("--help")   # the image's CMD
    assert shown.returncode == 0, shown.stderr
    assert {"init", "plan", "run", "janitor", "github"} <= set(re.findall(r"^  (\w+)", shown.stdout, re.M))
    version = run("--version")
    assert (version.returncode, version.stdout) == (0, f"meshbot, version {bot.__version__}\n")
    assert run("init", "shop").returncode == 0
    explain = run("-p", "shop", "plan", "--explain")
    assert explain.returncode == 0, explain.stderr
    assert "shop.orders" in explain.stdout and "backfill" in explain.stdout


@pytest.mark.slow   # builds a wheel and a virtualenv (~4 s alone), as tests/test_installed_package.py does
def test_the_wheel_built_from_the_build_context_installs_with_each_requirement_and_runs(tmp_path):
    """The builder stage's work without Docker: a wheel built from only the context's files, the requirement
    files its own shell loop writes, and `meshbot[connect] @ file://...` installed (no `-e`) into a fresh
    virtualenv whose dependencies come from this environment (a path entry after its own)."""
    context, dist = tmp_path / "context", tmp_path / "dist"
    context.mkdir()
    dist.mkdir()
    for source in {s.rstrip("/") for i, a in _stages()["builder"] if i == "COPY" for s in a.split()[:-1]}:
        if (ROOT / source).is_dir():
            shutil.copytree(ROOT / source, context / source, ignore=shutil.ignore_patterns("__pycache__", "*.pyc",
                                                                                            ".meshbot"))
        else:
            shutil.copy2(ROOT / source, context / source)
    subprocess.run([sys.executable, "-c", "import sys, setuptools.build_meta as b; b.build_wheel(sys.argv[1])",
                    str(dist)], cwd=context, check=True, capture_output=True, timeout=120)
    [build] = [a for i, a in _stages()["builder"] if i == "RUN"]
    loop = build.split(" && ", 1)[1].replace("/dist/", f"{dist}/")
    subprocess.run(["sh", "-c", loop], check=True, timeout=30)
    [wheel] = dist.glob("meshbot-*.whl")
    assert wheel.name.startswith(f"meshbot-{bot.__version__}-")
    for extra in ("connect", "spark"):
        assert (dist / f"{extra}.txt").read_text() == f"meshbot[{extra}] @ file://{wheel}\n"

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    purelib = Path(subprocess.run([str(venv / "bin/python"), "-c",
                                   "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  check=True, capture_output=True, text=True).stdout.strip())
    (purelib / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin/python"), "install", "-q", "--no-deps",
                    "--requirement", str(dist / "connect.txt")], check=True, capture_output=True, timeout=120)
    meshbot = venv / "bin" / "meshbot"
    where = subprocess.run([str(venv / "bin/python"), "-c", "import bot; print(bot.__file__)"], cwd=tmp_path,
                           env=_env(), capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(purelib)), where
    assert subprocess.run([str(meshbot), "init", "shop"], cwd=tmp_path, env=_env(), timeout=120).returncode == 0
    explain = subprocess.run([str(meshbot), "-p", "shop", "plan", "--explain"], cwd=tmp_path, env=_env(),
                             capture_output=True, text=True, timeout=120)
    assert explain.returncode == 0 and "shop.orders" in explain.stdout, explain.stderr
