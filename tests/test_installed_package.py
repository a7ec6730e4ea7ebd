"""meshbot installed as users install it: the wheel and the sdist built from this checkout, each installed
(no `-e`) into a fresh virtualenv outside it, run `init`, `plan --explain`, a local-mode pull request
through `meshbot github` and a notification render, with every template coming from the package itself.

The fresh virtualenvs take meshbot's dependencies from this environment's site-packages (a path entry
after their own, so no `.pth` of it runs: not the editable install's finder); meshbot itself is only
what the wheel or the sdist holds."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dists(tmp_path_factory) -> dict[str, Path]:
    """The wheel and the sdist, built by setuptools' PEP 517 backend from a copy of the checkout."""
    work = tmp_path_factory.mktemp("dist")
    source = work / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".venv", ".git", "__pycache__", "*.egg-info",
                                                                  "build", "dist", ".meshbot", "out"))
    built = {}
    for kind, hook in (("wheel", "build_wheel"), ("sdist", "build_sdist")):
        name = subprocess.run([sys.executable, "-c", f"import sys, setuptools.build_meta as b; print(b.{hook}(sys.argv[1]))",
                               str(work)], cwd=source, check=True, capture_output=True, text=True).stdout.split()[-1]
        built[kind] = work / name
    return built


def _venv(where: Path, dist: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    purelib = Path(subprocess.run([str(where / "bin" / "python"), "-c",
                                   "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                  check=True, capture_output=True, text=True).stdout.strip())
    (purelib / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(where / "bin" / "python"), "install", "-q",
                    "--no-deps", "--no-build-isolation", str(dist)], check=True, capture_output=True, cwd=where)
    return where / "bin"


def test_the_wheel_holds_every_template(dists):
    names = set(zipfile.ZipFile(dists["wheel"]).namelist())
    shipped = {f"bot/templates/{p.name}" for p in (ROOT / "templates").glob("*.j2")}
    assert shipped and shipped <= names, sorted(shipped - names)


@pytest.mark.parametrize("kind", ["wheel", "sdist"])
def test_installed_meshbot_inits_plans_syncs_a_fork_pr_locally_and_renders_a_notification(dists, kind, tmp_path):
    bin_dir = _venv(tmp_path / "venv", dists[kind])
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "PYTHON", "MESHBOT_"))}
    run = lambda *args, **kw: subprocess.run([str(bin_dir / "meshbot"), *args], capture_output=True, text=True,  # noqa: E731
                                             cwd=tmp_path, env=env, timeout=300, **kw)
    where = subprocess.run([str(bin_dir / "python"), "-c", "import bot; print(bot.__file__)"],
                           capture_output=True, text=True, check=True, env=env, cwd=tmp_path).stdout
    assert str(tmp_path / "venv") in where and str(ROOT) not in where

    init = run("init", "shop")
    assert init.returncode == 0, init.stderr
    explain = run("-p", "shop", "plan", "--explain")
    assert explain.returncode == 0, explain.stderr
    assert "shop.orders" in explain.stdout

    # a fork's pull request: meshbot posts a notice (rendered from the package's templates), no environment
    raw = json.loads((ROOT / "tests/fixtures/github/webhooks/pull_request/opened.payload.json").read_text())
    fork = copy.deepcopy(raw)
    fork["pull_request"]["head"]["repo"]["full_name"] = "someone/Hello-World"
    (tmp_path / "event.json").write_text(json.dumps(fork))
    bot = run("-p", "shop", "github", "--event-name", "pull_request", "--event-path", "event.json",
              "--output-dir", "out", "run-all")
    assert bot.returncode == 0, bot.stdout + bot.stderr
    assert "someone/Hello-World" in (tmp_path / "out" / "summary.md").read_text()

    render = subprocess.run([str(bin_dir / "python"), "-c", (
        "from bot.report.notify import Message; from bot.report.markdown import render, TEMPLATES_DIR;"
        "print(TEMPLATES_DIR); print(render('notification_slack.json.j2', Message('run_failure', 'prod', mrkdwn='x')))")],
        capture_output=True, text=True, env=env, cwd=tmp_path)
    assert render.returncode == 0, render.stderr
    templates, body = render.stdout.split("\n", 1)
    assert templates.startswith(str(tmp_path / "venv")) and json.loads(body)["text"] == "x"
