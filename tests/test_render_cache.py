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
