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
