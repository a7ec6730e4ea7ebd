"""Tests for bot.project.render_cache: cached reference renders match fresh ones after every kind of edit."""

from __future__ import annotations

from pathlib import Path

import pytest

import bot.project.render as render
from bot.project.config import load_config
from bot.project.loader import load_project
from bot.project.render_cache import reference_queries

CONFIG = """\
gateways:
  local:
    connection: {type: spark}
default_gateway: local
model_defaults:
  dialect: spark
variables:
  floor: 1
"""

MACROS = """\
from bot import macro


@macro()
def doubled(evaluator, column):
    return f"{column.sql(evaluator.dialect)} * 2"
"""

MODELS = {
    "emb.sql": "MODEL (name db.emb, kind EMBEDDED);\nSELECT id, amount FROM db.raw WHERE amount > @VAR('floor')",
    "uses_emb.sql": "MODEL (name db.uses_emb, kind FULL);\nSELECT id FROM db.emb",
    "typed.sql": "MODEL (name db.typed, kind FULL, columns (id INT, amount DOUBLE));\nSELECT id, amount FROM db.raw",
    "starred.sql": "MODEL (name db.starred, kind FULL);\nSELECT @STAR(db.typed) FROM db.typed",
    "macro_user.sql": "MODEL (name db.macro_user, kind FULL);\nSELECT @doubled(amount) AS a FROM db.typed",
}


@pytest.fixture()
def project_dir(tmp_path: Path) -> Path:
    (tmp_path / "config.yaml").write_text(CONFIG)
    (tmp_path / "macros").mkdir()
    (tmp_path / "macros" / "util.py").write_text(MACROS)
    (tmp_path / "models").mkdir()
    for name, text in MODELS.items():
        (tmp_path / "models" / name).write_text(text)
    return tmp_path


@pytest.fixture()
def renders(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the models actually rendered (cache misses)."""
    rendered: list[str] = []
    original = render.normalized_query_sql

    def counting(model, **kwargs):
        rendered.append(model.name)
        return original(model, **kwargs)

    monkeypatch.setattr(render, "normalized_query_sql", counting)
    return rendered


def _queries(root: Path, *, use_cache: bool = True) -> dict[str, str]:
    render._folder_registry.cache_clear()   # macros are otherwise loaded once per process
    config = load_config(root)
    project = load_project(root, config=config)
    return reference_queries(root=root, models=project.models, sources=project.source_digests,
                             variables=config.variables, gateway="local", macro_files=project.macro_files,
                             use_cache=use_cache)


def _check(root: Path, renders: list[str]) -> tuple[dict[str, str], set[str]]:
    """Cached result equals a fresh render; returns it and the models rendered for it."""
    renders.clear()
    cached = _queries(root)
    missed = set(renders)
    assert cached == _queries(root, use_cache=False)
    return cached, missed


def test_second_load_renders_nothing(project_dir: Path, renders: list[str]) -> None:
    first, missed = _check(project_dir, renders)
    assert missed == {"db.emb", "db.uses_emb", "db.typed", "db.starred", "db.macro_user"}
    second, missed = _check(project_dir, renders)
    assert missed == set() and second == first
    assert "`amount` > 1" in second["db.uses_emb"]


def test_embedded_parent_edit_rerenders_its_children(project_dir: Path, renders: list[str]) -> None:
    _check(project_dir, renders)
    path = project_dir / "models" / "emb.sql"
    path.write_text(path.read_text().replace("amount >", "amount >="))
    result, missed = _check(project_dir, renders)
    assert missed == {"db.emb", "db.uses_emb"}
    assert "`amount` >= 1" in result["db.uses_emb"]


def test_parent_columns_edit_rerenders_star_children(project_dir: Path, renders: list[str]) -> None:
    _check(project_dir, renders)
    path = project_dir / "models" / "typed.sql"
    path.write_text(path.read_text().replace("amount DOUBLE", "amount DECIMAL(10, 2)"))
    result, missed = _check(project_dir, renders)
    assert missed == {"db.typed", "db.starred", "db.macro_user"}
    assert "DECIMAL(10, 2)" in result["db.starred"]


def test_variable_and_macro_edits_rerender(project_dir: Path, renders: list[str]) -> None:
    _check(project_dir, renders)
    config = project_dir / "config.yaml"
    config.write_text(config.read_text().replace("floor: 1", "floor: 7"))
    result, missed = _check(project_dir, renders)
    assert "`amount` > 7" in result["db.uses_emb"] and "db.uses_emb" in missed

    macros = project_dir / "macros" / "util.py"
    macros.write_text(macros.read_text().replace("* 2", "* 3"))
    result, missed = _check(project_dir, renders)
    assert "db.macro_user" in missed
    assert "`amount` * 3" in result["db.macro_user"]


ALL_FILES = set(MODELS)
ALL_MODELS = {"db.emb", "db.uses_emb", "db.typed", "db.starred", "db.macro_user"}


@pytest.fixture()
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the model files actually parsed (parse cache misses)."""
    import bot.project.loader as loader

    parsed: list[str] = []
    original = loader.parse_model_file

    def counting(path, *args, **kwargs):
        parsed.append(path.name)
        return original(path, *args, **kwargs)

    monkeypatch.setattr(loader, "parse_model_file", counting)
    return parsed


def _pull_request_load(root: Path, fresh: frozenset[str] | None, parses: list[str],
                       renders: list[str]) -> tuple[set[str], set[str]]:
    """A load and its renders with `fresh` as a PR's files, after a load that left every entry in the
    cache: (the files parsed, the models rendered); the renders equal fresh ones."""
    _check(root, renders)
    parses.clear()
    renders.clear()
    config = load_config(root)
    project = load_project(root, config=config, fresh_files=fresh)
    queries = reference_queries(root=root, models=project.models, sources=project.source_digests,
                                variables=config.variables, gateway="local", macro_files=project.macro_files)
    done = set(parses), set(renders)
    assert queries == _queries(root, use_cache=False)
    return done


@pytest.mark.parametrize("fresh, parsed, rendered", [
    (None, set(), set()),                                                    # a local run: every key that matches
    (frozenset(), set(), set()),                                             # a PR of docs alone
    (frozenset({"models/typed.sql"}), {"typed.sql"}, {"db.typed", "db.starred", "db.macro_user"}),
    (frozenset({"models/emb.sql", "tests/test_emb.yaml"}), {"emb.sql"}, {"db.emb", "db.uses_emb"}),
    (frozenset({"models/emb.sql", "macros/util.py"}), ALL_FILES, ALL_MODELS),   # macros shape every entry
    (frozenset({"config.yaml"}), ALL_FILES, ALL_MODELS),
    (frozenset({"seeds/raw.csv"}), ALL_FILES, ALL_MODELS),
])
def test_a_pull_requests_own_files_are_parsed_and_rendered_anew_whatever_the_cache_holds(
        project_dir: Path, parses: list[str], renders: list[str], fresh, parsed, rendered) -> None:
    """Their entries match their keys (nothing was edited since the cache was written), yet a pull
    request's own files and what is downstream of them come from no cache entry: anyone who can save
    one in the PR's cache scope can compute those keys."""
    assert _pull_request_load(project_dir, fresh, parses, renders) == (parsed, rendered)


def test_a_pull_request_takes_nothing_from_the_cache_when_the_project_holds_a_symlink(
        project_dir: Path, parses: list[str], renders: list[str], tmp_path_factory: pytest.TempPathFactory) -> None:
    """A file reached through a symlink may be any file of the repository the PR changed."""
    (project_dir / "lib").symlink_to(tmp_path_factory.mktemp("shared"))
    assert _pull_request_load(project_dir, frozenset({"models/emb.sql"}), parses, renders) == \
        (ALL_FILES, ALL_MODELS)
    assert _pull_request_load(project_dir, None, parses, renders) == (set(), set())
