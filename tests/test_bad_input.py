"""Bad input through the real CLI: one paragraph naming the culprit, exit code 1, no traceback, nothing changed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.cli import cli
from bot.project.example import write_example


def invoke(root: Path, *args: str):
    return CliRunner().invoke(cli, ["-p", str(root), *args], catch_exceptions=False)


def assert_refused(result, *needles: str) -> str:
    """Exit 1 with one `Error:` paragraph holding every needle, and no traceback."""
    output = result.output
    assert result.exit_code == 1, output
    assert "Traceback" not in output and output.count("Error:") == 1, output
    assert output.strip().startswith("Error:") and "\n\n" not in output.strip(), output
    for needle in needles:
        assert needle in output, output
    return output


@pytest.fixture
def shop(tmp_path) -> Path:
    write_example(tmp_path / "shop")
    return tmp_path / "shop"


def test_non_utf8_model_file_is_named(shop):
    (shop / "models" / "latin1.sql").write_bytes(
        b"MODEL (name shop.latin1, kind FULL);\n\nSELECT 1 AS x -- caf\xe9\n")
    assert_refused(invoke(shop, "plan", "--explain"), "models/latin1.sql:3", "not UTF-8", "0xe9")


def test_non_utf8_audit_and_test_files_are_named(shop):
    (shop / "audits" / "latin1.sql").write_bytes(b"AUDIT (name latin1);\nSELECT 1 -- \xff\n")
    assert_refused(invoke(shop, "plan", "--explain"), "audits/latin1.sql:2", "not UTF-8")
    (shop / "audits" / "latin1.sql").unlink()
    (shop / "tests" / "latin1.yaml").write_bytes(b"test_x:\n  model: shop.orders # \xe9\n")
    assert_refused(invoke(shop, "test"), "tests/latin1.yaml:2", "not UTF-8")


@pytest.mark.parametrize("layout", ["file_cycle", "self", "folder_to_ancestor"])
def test_symlink_loop_under_models_is_refused(shop, layout):
    models = shop / "models"
    if layout == "file_cycle":
        os.symlink("b.sql", models / "a.sql")
        os.symlink("a.sql", models / "b.sql")
        culprit = "models/a.sql"
    elif layout == "self":
        (models / "nested").mkdir()
        os.symlink("me.sql", models / "nested" / "me.sql")
        culprit = "models/nested/me.sql"
    else:
        (models / "nested").mkdir()
        os.symlink("..", models / "nested" / "up")
        culprit = "models/nested/up"
    assert_refused(invoke(shop, "plan", "--explain"), "symlink loop", culprit)
    assert not (shop / ".meshbot" / "state.db").exists()


def test_symlinked_model_file_still_loads(shop, tmp_path):
    shared = tmp_path / "shared.sql"
    shared.write_text("MODEL (name shop.shared, kind FULL);\nSELECT 1 AS x\n")
    os.symlink(shared, shop / "models" / "shared.sql")
    result = invoke(shop, "plan", "--explain")
    assert result.exit_code == 0, result.output
    assert "shop.shared" in result.output


@pytest.mark.parametrize("command", [
    ("plan", "--explain"), ("plan", "dev", "--explain"), ("plan", "pr_7", "--explain", "--skip-backfill"),
    ("render", "shop.orders"), ("evaluate", "shop.orders"), ("audit",),
])
def test_start_after_end_is_refused_on_any_environment(shop, command):
    result = invoke(shop, *command, "--start", "2024-01-05", "--end", "2024-01-01")
    assert_refused(result, "`--start 2024-01-05` is after `--end 2024-01-01`")
    assert not (shop / ".meshbot").exists()   # refused before state or Spark were touched


def test_start_equal_to_end_is_one_day(shop):
    result = invoke(shop, "render", "shop.orders", "--start", "2024-01-03", "--end", "2024-01-03")
    assert result.exit_code == 0, result.output
    assert "'2024-01-03'" in result.output
