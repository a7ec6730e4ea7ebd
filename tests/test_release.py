"""A release's version has one source and the release workflow checks it: bot/__init__.py's __version__ is
what setuptools, `meshbot --version` and .ci/release.py read; a tag is published only when it is that version
and CHANGELOG.md has its section; .github/workflows/publish.yml runs those checks before it builds the dists
and both images, creates the release and moves the major tag.

About no module of bot/: .ci/release.py, CHANGELOG.md and publish.yml (its permissions and pins are checked
with the other workflows' in tests/test_github_workflows.py)."""

from __future__ import annotations

import doctest
import importlib.util
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

import bot

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / ".ci" / "release.py"
CHANGELOG = (ROOT / "CHANGELOG.md").read_text()


def _release_module():
    spec = importlib.util.spec_from_file_location("release", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


release = _release_module()


def _publish() -> dict:
    workflow = yaml.safe_load((ROOT / ".github/workflows/publish.yml").read_text())
    workflow["on"] = workflow.pop(True)   # YAML 1.1 reads `on:` as a boolean
    return workflow


def _step(job: str, name: str) -> dict:
    return next(s for s in _publish()["jobs"][job]["steps"] if s.get("name") == name)


def test_the_version_has_one_source_that_setuptools_and_the_release_script_read(tmp_path):
    """The version in the metadata the build backend writes (what pip and the wheel carry) is __version__."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "bot.__version__"}
    source = tmp_path / "source"   # a copy: the backend writes meshbot.egg-info next to pyproject.toml
    for name in ("pyproject.toml", "setup.py", "README.md"):
        (source / name).parent.mkdir(exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    for folder in ("bot", "templates"):
        shutil.copytree(ROOT / folder, source / folder, ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run([sys.executable, "-c", "import sys, setuptools.build_meta as b; "
                           "print(b.prepare_metadata_for_build_wheel(sys.argv[1]))", str(tmp_path)],
                          cwd=source, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    metadata = (tmp_path / done.stdout.split()[-1] / "METADATA").read_text()
    assert re.search(r"^Version: (.+)$", metadata, re.M).group(1) == bot.__version__
    assert release.package_version() == bot.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+((a|b|rc)\d+)?", bot.__version__)


def test_the_release_scripts_doctests():
    assert doctest.testmod(release).failed == 0


def test_the_changelog_keeps_an_unreleased_section_and_one_for_this_version():
    headings = re.findall(r"^## (.+)$", CHANGELOG, re.M)
    assert headings[0] == "[Unreleased]"
    assert f"[{bot.__version__}]" in {h.split(" - ")[0] for h in headings}
    assert all(re.fullmatch(r"\[\d+\.\d+\.\d+\S*\] - \d{4}-\d{2}-\d{2}", h) for h in headings[1:]), headings
    assert release.changelog_section(CHANGELOG, bot.__version__).startswith("### Added")
    linked = set(re.findall(r"^\[([^\]]+)\]: https://", CHANGELOG, re.M))
    assert linked == {h.split(" - ")[0].strip("[]") for h in headings}


def test_the_tag_check_accepts_only_the_packages_version():
    assert release.check(f"v{bot.__version__}") == [
        f"version={bot.__version__}", f"major=v{bot.__version__.split('.')[0]}", "prerelease=false"]
    for tag in (bot.__version__, f"v{bot.__version__}.1", "v99.0.0", f"V{bot.__version__}"):
        with pytest.raises(SystemExit, match=f"the tag {re.escape(tag)} is not the package's version"):
            release.check(tag)


def _project(tmp_path: Path, version: str, changelog: str) -> Path:
    (tmp_path / "bot").mkdir(parents=True)
    (tmp_path / "bot" / "__init__.py").write_text(f'"""x."""\n\nFOO = 1\n__version__ = "{version}"\n')
    (tmp_path / "CHANGELOG.md").write_text(changelog)
    return tmp_path


def test_a_version_without_its_changelog_section_is_not_published(tmp_path):
    root = _project(tmp_path, "1.2.0", "# Changelog\n\n## [Unreleased]\n\n- new\n\n## [1.1.0] - 2027-01-01\n\n- old\n")
    with pytest.raises(SystemExit, match=r"CHANGELOG.md has no section `## \[1.2.0\]"):
        release.check("v1.2.0", root)
    (root / "CHANGELOG.md").write_text("## [1.2.0] - 2027-02-01\n\n## [1.1.0] - 2027-01-01\n\n- old\n")
    with pytest.raises(SystemExit, match="or it is empty"):
        release.check("v1.2.0", root)


def test_a_pre_release_moves_no_major_tag(tmp_path):
    root = _project(tmp_path, "2.0.0rc1", "## [2.0.0rc1] - 2027-03-01\n\n### Changed\n\n- everything\n")
    assert release.check("v2.0.0rc1", root) == ["version=2.0.0rc1", "major=", "prerelease=true"]
    root = _project(tmp_path / "odd", "2.0", "## [2.0] - 2027-03-01\n\n- x\n")
    with pytest.raises(SystemExit, match="neither X.Y.Z nor a pre-release"):
        release.check("v2.0", root)


def test_the_workflows_check_step_fails_the_job_on_a_wrong_tag_and_sets_the_outputs(tmp_path):
    """The step's script as the runner runs a `run:` without `shell:` (bash -e), from the checkout's root."""
    step = _step("check", "The tag is the package's version, with a CHANGELOG section")
    assert step["env"] == {"TAG": "${{ github.ref_name }}"}

    def run(tag: str) -> tuple[subprocess.CompletedProcess, str]:
        output = tmp_path / f"output-{tag}"
        output.write_text("")
        done = subprocess.run(["bash", "-e", "-c", step["run"]], cwd=ROOT, capture_output=True, text=True,
                              env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "TAG": tag,
                                   "GITHUB_OUTPUT": str(output)}, timeout=60)
        return done, output.read_text()

    done, outputs = run(f"v{bot.__version__}")
    assert done.returncode == 0, done.stderr
    assert outputs.splitlines() == release.check(f"v{bot.__version__}")
    done, outputs = run("v99.0.0")
    assert done.returncode == 1 and "is not the package's version" in done.stderr and outputs == ""


def test_the_notes_command_prints_this_versions_changelog_section():
    done = subprocess.run([sys.executable, "-I", str(SCRIPT), "notes", bot.__version__], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout == release.changelog_section(CHANGELOG, bot.__version__) + "\n"
    assert "[Unreleased]" not in done.stdout and "https://github.com" not in done.stdout


def test_publish_runs_on_version_tags_checks_first_and_builds_both_images():
    workflow = _publish()
    assert workflow["on"] == {"push": {"tags": ["v*.*.*"]}}
    jobs = workflow["jobs"]
    assert jobs["image"]["needs"] == "check" and jobs["release"]["needs"] == ["check", "image"]
    builds = _step("check", "Build the wheel and the sdist")["run"]
    assert "python -m build --outdir release/dist ." in builds and ".ci/release.py notes" in builds
    push = _step("image", "Build both targets and push them")["run"]
    targets = re.search(r"for target in ([\w ]+); do", push).group(1).split()
    dockerfile_targets = re.findall(r"^FROM runtime AS (\w+)$", (ROOT / "Dockerfile").read_text(), re.M)
    assert sorted(targets) == sorted(dockerfile_targets) == ["connect", "spark"]
    assert 'image="ghcr.io/${GITHUB_REPOSITORY,,}"' in push and "--password-stdin" in push
    create = _step("release", "Create the release with the CHANGELOG section and the dists")
    assert "--notes-file release/notes.md" in create["run"] and "--verify-tag" in create["run"]
    move = _step("release", "Move the major tag to the released commit")
    assert move["if"] == "needs.check.outputs.major != ''"
    assert '"sha=$GITHUB_SHA"' in move["run"] and "refs/tags/$MAJOR" in move["run"]
    for job in jobs.values():
        for step in job["steps"]:
            if "run" in step:   # every script at least parses as bash
                assert subprocess.run(["bash", "-n", "-c", step["run"]], capture_output=True).returncode == 0
