"""The package's layering and house rules hold: import contracts, one-line module docstrings, a thin Context."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_import_contracts_are_kept():
    result = subprocess.run([str(Path(sys.executable).with_name("lint-imports"))],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_module_says_what_it_does_in_one_line():
    missing = []
    for path in sorted((ROOT / "bot").rglob("*.py")):
        if path.name == "__init__.py" and not path.read_text().strip():
            continue
        doc = ast.get_docstring(ast.parse(path.read_text()))
        if not doc or not doc.splitlines()[0].strip():
            missing.append(str(path.relative_to(ROOT)))
    assert missing == []


def test_the_context_stays_a_facade_under_300_lines():
    lines = len((ROOT / "bot" / "context.py").read_text().splitlines())
    assert lines < 300, f"bot/context.py has {lines} lines: move the logic into the room that owns it"


# bot/github modules whose tests are not in a file named after them, with the files that test them.
GITHUB_TESTED_ELSEWHERE = {
    "checks": ("test_github_outcomes.py", "test_github_comment.py"),   # names only: check titles, status line order
}
# test_github_*.py files named after no module: end-to-end scenarios through several modules (each says so).
GITHUB_SCENARIOS = {"comment", "lifecycle", "trust", "fresh_clone", "workflows"}


def test_every_github_module_has_a_test_file_named_after_it_or_says_where_it_is_tested():
    """bot/github/X.py and bot/github/runners/X.py are tested in tests/test_github_X.py (the two folders share
    no module name), or are listed in GITHUB_TESTED_ELSEWHERE with the files that test them."""
    github = ROOT / "bot" / "github"
    modules = [p.stem for folder in (github, github / "runners") for p in sorted(folder.glob("*.py"))
               if p.name != "__init__.py"]
    assert len(modules) == len(set(modules)), "a runner and a bot/github module share a name (and a test file)"
    files = {p.stem.removeprefix("test_github_") for p in (ROOT / "tests").glob("test_github_*.py")}
    untested = sorted(m for m in modules if m not in files and m not in GITHUB_TESTED_ELSEWHERE)
    assert untested == [], "add tests/test_github_<module>.py, or list the module in GITHUB_TESTED_ELSEWHERE"
    assert sorted(set(GITHUB_TESTED_ELSEWHERE) & files) == [] and set(GITHUB_TESTED_ELSEWHERE) <= set(modules)
    assert all((ROOT / "tests" / f).is_file() for where in GITHUB_TESTED_ELSEWHERE.values() for f in where)
    assert sorted(files - set(modules)) == sorted(GITHUB_SCENARIOS)
