"""`meshbot format`: fixtures/format/after holds what SQLMesh 0.236.4's `sqlmesh format` wrote for each file
of fixtures/format/before (same sqlglot 30 pretty printer); meshbot must write the same bytes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.cli.app import cli
from bot.errors import ConfigError
from bot.project.config import FormatConfig
from bot.project.format import format_model_text

FIXTURES = Path(__file__).parent / "fixtures" / "format"
FILES = sorted(str(p.relative_to(FIXTURES / "before")) for p in (FIXTURES / "before").rglob("*.sql"))


def _copy(tmp_path: Path, which: str) -> Path:
    root = tmp_path / which
    shutil.copytree(FIXTURES / which, root)
    return root


def _invoke(root: Path, *args: str):
    return CliRunner().invoke(cli, ["-p", str(root), "format", *args], catch_exceptions=False)


def _contents(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in root.rglob("*.sql")}


@pytest.mark.parametrize("name", FILES)
def test_each_file_is_formatted_as_sqlmesh_formats_it(name):
    text = (FIXTURES / "before" / name).read_text()
    keyword = "AUDIT" if name.startswith("audits") else "MODEL"
    dialect = "spark" if "dialect spark" in text else "duckdb"
    formatted = format_model_text(text, path=Path(name), dialect=dialect, keyword=keyword)
    assert formatted == (FIXTURES / "after" / name).read_text()
    assert format_model_text(formatted, path=Path(name), dialect=dialect, keyword=keyword) == formatted


def test_check_on_an_unformatted_project_lists_the_files_and_changes_nothing(tmp_path):
    root = _copy(tmp_path, "before")
    before = _contents(root)
    result = _invoke(root, "--check")
    assert result.exit_code == 1
    assert "models/g.sql needs reformatting" in result.output
    assert "audits/positive.sql needs reformatting" in result.output
    assert f"{len(FILES)} file(s) need reformatting." in result.output
    assert _contents(root) == before


def test_check_on_a_formatted_project_passes(tmp_path):
    result = _invoke(_copy(tmp_path, "after"), "--check")
    assert result.exit_code == 0, result.output
    assert "All files are formatted." in result.output


def test_format_rewrites_every_file_and_keeps_comments(tmp_path):
    root = _copy(tmp_path, "before")
    assert _invoke(root).exit_code == 0
    assert _contents(root) == _contents(FIXTURES / "after")
    text = (root / "models" / "g.sql").read_text()
    for comment in ("/* leading comment */", "/* trailing prop comment */", "/* block comment */",
                    "/* inline */", "/* trailing */"):
        assert comment in text
    assert _invoke(root, "--check").exit_code == 0


def test_paths_limit_the_files(tmp_path):
    root = _copy(tmp_path, "before")
    before = _contents(root)
    assert _invoke(root, str(root / "models" / "a.sql")).exit_code == 0
    after = _contents(root)
    assert after["models/a.sql"] == (FIXTURES / "after" / "models" / "a.sql").read_text()
    assert {k: v for k, v in after.items() if k != "models/a.sql"} == \
        {k: v for k, v in before.items() if k != "models/a.sql"}


def test_formatting_false_leaves_the_file_alone(tmp_path):
    root = _copy(tmp_path, "after")
    text = "MODEL (name s.raw, kind FULL, formatting false);\nselect   1 as id\n"
    (root / "models" / "raw.sql").write_text(text)
    assert _invoke(root, "--check").exit_code == 0
    assert (root / "models" / "raw.sql").read_text() == text


def test_format_config_append_newline_and_no_rewrite_casts():
    options = FormatConfig(append_newline=True, no_rewrite_casts=True)
    text = "MODEL (name s.m);\nselect cast(a as int) as a from t"
    assert format_model_text(text, path=Path("m.sql"), dialect="duckdb", options=options) == (
        "MODEL (\n  name s.m\n);\n\nSELECT\n  CAST(a AS INT) AS a\nFROM t\n")


def test_a_syntax_error_names_the_file_and_line_and_nothing_is_written(tmp_path):
    root = _copy(tmp_path, "before")
    (root / "models" / "zz.sql").write_text("MODEL (name s.zz);\n\nSELECT 1 +* FROM")
    before = _contents(root)
    result = _invoke(root)
    assert result.exit_code == 1
    assert "zz.sql:3" in result.output
    assert _contents(root) == before


def test_unknown_format_option_is_a_config_error(tmp_path):
    root = _copy(tmp_path, "after")
    (root / "config.yaml").write_text("model_defaults:\n  dialect: duckdb\nformat:\n  colour: red\n")
    result = _invoke(root, "--check")
    assert result.exit_code == 1
    assert "config.yaml" in result.output and "colour" in result.output
    with pytest.raises(ConfigError):
        from bot.project.config import load_config
        load_config(root)
