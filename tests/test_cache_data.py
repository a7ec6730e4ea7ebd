"""The .meshbot caches are data, never code: a planted pickle runs nothing, a garbled file is named once and
rebuilt, an entry of the wrong shape is a miss, and the plan stays the one a cache-less load gives."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

import pytest
from click.testing import CliRunner

import bot.project.loader as loader
from bot.cli import cli
from bot.fingerprint import HASH_CACHE_FILE
from bot.project.cache import CACHE_FILE, entries_from_data
from bot.project.example import write_example
from bot.project.loader import load_project
from bot.project.render_cache import RENDER_CACHE_FILE
from bot.project.serialize import model_to_dict

CACHE_DIR = Path(".meshbot") / "cache"


class _Planted:
    """Unpickling this creates `marker`: what a cache entry saved by an untrusted CI job could do."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return open, (str(self.marker), "w")


def _plan(root: Path) -> tuple[dict, str]:
    """(`plan prod --explain --json` as data, what it wrote to stderr)."""
    result = CliRunner().invoke(cli, ["-p", str(root), "plan", "prod", "--explain", "--json"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), result.stderr


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    write_example(tmp_path / "shop")
    return tmp_path / "shop"


@pytest.fixture
def right_plan(shop: Path, tmp_path: Path) -> dict:
    """The plan of a copy of the project that never had a cache."""
    fresh = tmp_path / "fresh"
    shutil.copytree(shop, fresh)
    plan, _ = _plan(fresh)
    shutil.rmtree(fresh / ".meshbot", ignore_errors=True)
    return _comparable(plan, fresh)


def _comparable(plan: dict, root: Path) -> dict:
    """The plan without its random id and with the project folder as <root>."""
    plan = {key: value for key, value in plan.items() if key != "plan_id"}
    return json.loads(json.dumps(plan).replace(str(root), "<root>"))


def _parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the model files parsed (cache misses) from now on."""
    parsed: list[str] = []
    original = loader.parse_model_file

    def counting(path, *args, **kwargs):
        parsed.append(Path(path).name)
        return original(path, *args, **kwargs)

    monkeypatch.setattr(loader, "parse_model_file", counting)
    return parsed


def test_a_pickle_planted_at_the_old_cache_names_runs_nothing(shop, right_plan, tmp_path):
    marker = tmp_path / "pwned"
    (shop / CACHE_DIR).mkdir(parents=True)
    for name in ("models.pickle", "rendered.pickle"):
        (shop / CACHE_DIR / name).write_bytes(pickle.dumps(_Planted(marker)))
    plan, stderr = _plan(shop)
    assert not marker.exists()
    assert _comparable(plan, shop) == right_plan
    assert (shop / CACHE_FILE).is_file() and (shop / RENDER_CACHE_FILE).is_file()
    plan, stderr = _plan(shop)   # warm, from the caches the first plan wrote
    assert not marker.exists() and _comparable(plan, shop) == right_plan and "meshbot:" not in stderr


def test_a_pickle_at_the_new_names_is_not_json(shop, right_plan, tmp_path):
    marker = tmp_path / "pwned"
    (shop / CACHE_DIR).mkdir(parents=True)
    for path in (CACHE_FILE, RENDER_CACHE_FILE):
        (shop / path).write_bytes(pickle.dumps(_Planted(marker)))
    plan, stderr = _plan(shop)
    assert not marker.exists() and _comparable(plan, shop) == right_plan
    assert stderr.count("meshbot: ignoring the") == 2 and "(not valid JSON); rebuilding it" in stderr


def _truncated(text: str) -> str:
    return text[: len(text) // 2]


def _wrong_shape(text: str) -> str:
    data = json.loads(text)
    data["entries"] = {key: "not an entry" for key in data["entries"]}
    return json.dumps(data)


@pytest.mark.parametrize("garble", [_truncated, lambda text: "[]", _wrong_shape, lambda text: "\0\xff junk"])
@pytest.mark.parametrize("which", [CACHE_FILE, RENDER_CACHE_FILE, HASH_CACHE_FILE])
def test_a_garbled_cache_file_is_named_once_and_rebuilt(shop, right_plan, which, garble):
    _plan(shop)
    path = shop / which
    path.write_text(garble(path.read_text()))
    plan, stderr = _plan(shop)
    assert _comparable(plan, shop) == right_plan
    notices = [line for line in stderr.splitlines() if line.startswith("meshbot: ignoring")]
    what = {CACHE_FILE: "parse cache", RENDER_CACHE_FILE: "render cache", HASH_CACHE_FILE: "hash cache"}[which]
    assert len(notices) == 1 and f"the {what} {which} (" in notices[0] and notices[0].endswith("rebuilding it")
    json.loads(path.read_text())   # rebuilt
    plan, stderr = _plan(shop)
    assert _comparable(plan, shop) == right_plan and "meshbot:" not in stderr


@pytest.mark.parametrize("spoil", [
    lambda model: model.update(columns=5),                       # a field of the wrong type
    lambda model: model.pop("name"),                             # a field missing
    lambda model: model.update(evil={"__reduce__": "os.system"}),   # a field meshbot never writes
    lambda model: model["kind"].update(name="NOT_A_KIND"),       # the right shape, but it does not rebuild
    lambda model: model["audits"].append({"name": 1}),           # an item of the wrong shape
])
def test_an_entry_of_the_wrong_shape_is_a_miss(shop, monkeypatch, spoil):
    first = load_project(shop)
    path = shop / CACHE_FILE
    data = json.loads(path.read_text())
    key = next(key for key in data["entries"] if key.endswith("orders.sql"))
    spoil(data["entries"][key][1][0]["model"])
    path.write_text(json.dumps(data))
    assert entries_from_data(data["entries"][key][1]) is None
    parsed = _parses(monkeypatch)
    second = load_project(shop)
    assert parsed == [Path(key).name]   # only the spoiled file, parsed again
    assert {n: model_to_dict(m) for n, m in second.models.items()} == \
        {n: model_to_dict(m) for n, m in first.models.items()}
    parsed.clear()
    load_project(shop)
    assert parsed == []   # and cached again


def test_the_caches_are_plain_json_and_warm_loads_parse_nothing(shop, monkeypatch):
    first = load_project(shop)
    _plan(shop)
    for path in (CACHE_FILE, RENDER_CACHE_FILE):
        assert isinstance(json.loads((shop / path).read_text()), dict)
    assert not list((shop / ".meshbot").rglob("*.pickle"))
    parsed = _parses(monkeypatch)
    second = load_project(shop)
    assert parsed == []
    for name, model in first.models.items():
        assert model_to_dict(second.models[name]) == model_to_dict(model)
        assert second.models[name].query == model.query


def test_a_planted_symlink_at_a_temporary_name_is_not_written_through(shop, tmp_path):
    """A link planted where a pid-named temporary file would go: meshbot refuses any symlink in
    .meshbot/cache (bot/project/meshbot_dir.py) and writes nothing; and the caches are written to a
    fresh random name and renamed, so even without that check the write would not go through it."""
    from bot.project.cache import write_atomically

    victim = tmp_path / "victim.txt"
    victim.write_text("untouched")
    (shop / CACHE_DIR).mkdir(parents=True)
    for path in (CACHE_FILE, RENDER_CACHE_FILE):
        (shop / path.parent / f"{path.name}.{os.getpid()}.tmp").symlink_to(victim)
    result = CliRunner().invoke(cli, ["-p", str(shop), "plan", "prod", "--explain"], catch_exceptions=False)
    assert result.exit_code == 1 and f"`{CACHE_FILE}.{os.getpid()}.tmp` is a symlink" in result.output
    assert not (shop / CACHE_FILE).exists()
    write_atomically(shop / CACHE_FILE, "{}")
    assert victim.read_text() == "untouched" and (shop / CACHE_FILE).read_text() == "{}"


def test_the_actions_symlink_check_prints_one_workflow_command_whatever_the_link_holds(tmp_path):
    """The action runs bot/project/meshbot_dir.py before anything is classified, fork PRs included: a link
    whose name and target hold line breaks forges no second `::warning::` or `::add-mask::` line."""
    project = tmp_path / "project"
    (project / ".meshbot").mkdir(parents=True)
    (project / ".meshbot" / "cache").symlink_to("/x\n::warning file=a.sql::approved by @admin\n::add-mask::meshbot")
    result = subprocess.run([sys.executable, "-I", str(ROOT / "bot/project/meshbot_dir.py"), "project"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("::error title=meshbot::`project/.meshbot/cache` is a symlink")
    assert "%0A::warning" in lines[0]
