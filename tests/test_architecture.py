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
    "check_names": ("test_github_outcomes.py", "test_github_comment.py"),   # names only: check titles, status line order
    "authorize": ("test_github_trust.py", "test_github_deploy.py", "test_github_rollback.py", "test_github_queue.py"),
    "comment_fitting": ("test_github_views.py", "test_report_comment_state.py"),   # fitting what views describe
    "hosts": ("test_github_action.py", "test_github_local.py", "test_github_trust.py"),   # through main()
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


# Sizes and cycles that are over the house limits today, in rooms other engineers are changing now.
# They may only shrink: an entry is removed once it is within the limit, and no entry is added.
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
LONG_MODULES = {
    "bot/github/views.py": 600, "bot/project/cache.py": 640,
    "bot/project/config.py": 656, "bot/project/loader.py": 555, "bot/project/macros.py": 431,
    "bot/project/sqltext.py": 403, "bot/spark/engine.py": 543,
    "bot/spark/session.py": 480,
}
LONG_FUNCTIONS = {
    "bot/github/runners/deploy.py:deploy_production": 77,
    "bot/project/loader.py:_load_sql_models": 69,
}
IMPORT_CYCLES: set[frozenset[str]] = set()


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted((ROOT / "bot").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def test_no_module_over_400_lines_and_no_function_over_60_beyond_todays_exceptions():
    long_modules, long_functions = {}, {}
    for path in _modules().values():
        name, text = str(path.relative_to(ROOT)), path.read_text()
        if len(text.splitlines()) > MAX_MODULE_LINES:
            long_modules[name] = len(text.splitlines())
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long_functions[f"{name}:{node.name}"] = length
    for found, allowed, what in ((long_modules, LONG_MODULES, "lines"), (long_functions, LONG_FUNCTIONS, "lines")):
        grown = {name: size for name, size in found.items() if size > allowed.get(name, 0)}
        assert grown == {}, f"over the limit ({what}; split by idea): {grown}"


def _imports(tree: ast.AST, module: str, is_package: bool, modules: dict[str, Path]) -> set[str]:
    """The bot modules `module` imports anywhere (functions too), leaving out `if TYPE_CHECKING:` blocks."""
    found: set[str] = set()
    package = module if is_package else module.rpartition(".")[0]

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1] + ([base] if base else []))
            for alias in node.names:
                target = f"{base}.{alias.name}"
                found.add(target if target in modules else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {name for name in found if name in modules and name != module}


def test_no_import_cycle_even_through_imports_inside_functions():
    modules = _modules()
    graph = {name: _imports(ast.parse(path.read_text()), name, path.name == "__init__.py", modules)
             for name, path in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: set[frozenset[str]] = set()

    def strongly_connected(node: str) -> None:   # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in graph[node]:
            if target not in index:
                strongly_connected(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.add(frozenset(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for name in graph:
        if name not in index:
            strongly_connected(name)
    assert cycles - IMPORT_CYCLES == set(), sorted(sorted(c) for c in cycles - IMPORT_CYCLES)
