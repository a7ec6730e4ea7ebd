"""Run a SQLMesh project on SQLMesh 0.236.4 (DuckDB) and on meshbot (local Spark) over the same window and
print, per model, whether both load and run it and hold the same rows; then the tests' and audits' verdicts.

    .venv/bin/python benchmarks/compat/compat.py PROJECT_DIR [--start 2024-01-01 --end 2024-01-07]
    .venv/bin/python benchmarks/compat/compat.py --list benchmarks/compat/projects.toml [--only NAME]

A project is copied twice to a scratch folder (its own files are never changed), each copy's config.yaml
given a gateway of its own (`compat`: DuckDB for SQLMesh, local Spark and SQLite state for meshbot) as its
default. SQLMesh runs from a virtualenv this script makes outside the repository (`--sqlmesh-venv`); it is
never a dependency of meshbot. `--list` reads repository, commit, folder and window per project and
clones each repository at that commit (network needed); nothing of a project is kept here."""

from __future__ import annotations

import argparse
import datetime
import getpass
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
SQLMESH = "sqlmesh==0.236.4"
DEFAULT_VENV = Path.home() / ".cache" / "meshbot-compat" / "sqlmesh-0.236.4"
GATEWAYS = {
    "sqlmesh": {"connection": {"type": "duckdb", "database": "compat.duckdb"}},
    "meshbot": {"connection": {"type": "spark"},
                "state_connection": {"type": "sqlite", "database": ".meshbot/compat-state.db"}},
}


@dataclass(frozen=True)
class Project:
    name: str
    folder: Path
    # a multi-repo project's repositories (relative to `folder`), planned together as `-p a -p b`
    repositories: tuple[str, ...] = ()
    start: str = "2024-01-01"
    end: str = "2024-01-07"
    execution_time: str = ""
    gateway: dict = field(default_factory=dict)   # more keys for both gateways (e.g. variables)
    # environment variables both engines (and the config's `{{ env_var(...) }}`) read, as a user sets them
    env: dict = field(default_factory=dict)
    # drop the project's own gateways from both copies: SQLMesh creates an engine adapter for every gateway
    # (its default catalog), so a warehouse gateway without credentials stops it before any model runs
    drop_gateways: bool = False
    requirements: tuple[str, ...] = ()            # packages the project's Python files import (faker...)
    checkout: Path = Path(".")                    # the repository's clone (`./` requirements are in it)

    @property
    def run_at(self) -> str:
        return self.execution_time or self.end


def sqlmesh_python(venv: Path) -> Path:
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"making {venv} with {SQLMESH} (once)", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", SQLMESH, "duckdb"], check=True)
    return python


# appended to a copy of a config.py project (a Config object named `config`, SQLMesh's default name);
# both engines' Config and GatewayConfig take a connection given as a mapping
CONFIG_PY_GATEWAY = """

# -- added by meshbot's compat harness: the gateway this engine runs the comparison on --
from sqlmesh.core.config import GatewayConfig as _CompatGateway
config.gateways = {{**(config.gateways if isinstance(config.gateways, dict) else {{}}),
                   "compat": _CompatGateway(**{spec!r})}}
config.default_gateway = "compat"
"""


def prepared_copy(project: Project, engine: str, scratch: Path) -> list[Path]:
    """The project copied, each repository's config given the harness's own gateway for `engine` as its
    default; the folders to plan (one, or a multi-repo project's repositories in order)."""
    target = scratch / engine
    shutil.copytree(project.folder, target, ignore=shutil.ignore_patterns(".cache", "logs", "*.duckdb", ".meshbot"))
    folders = [target / repository for repository in project.repositories] or [target]
    spec = {**GATEWAYS[engine], **project.gateway}
    for folder in folders:
        config_path = next((folder / name for name in ("config.yaml", "config.yml") if (folder / name).exists()), None)
        if config_path is None and (folder / "config.py").exists():
            (folder / "config.py").write_text((folder / "config.py").read_text() + CONFIG_PY_GATEWAY.format(spec=spec))
            continue
        if config_path is None:
            raise SystemExit(f"{project.name}: no config.yaml or config.py in {folder}")
        config = yaml.safe_load(rendered_config(config_path.read_text(), project.env)) or {}
        if project.drop_gateways:
            config["gateways"] = {}
        config.setdefault("gateways", {})["compat"] = spec
        config["default_gateway"] = "compat"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    return folders


def rendered_config(text: str, env: dict | None = None) -> str:
    """A config.yaml's text rendered as SQLMesh renders it before reading the YAML (sqlmesh.utils.yaml):
    Jinja with `env_var(name, default=None)` read from this environment and `user()`, so an unquoted
    `{{ env_var('X') }}` reads as SQLMesh reads it (`None` when X is not set). Both copies get the same text."""
    if "{{" not in text and "{%" not in text:
        return text
    import jinja2

    environ = {**os.environ, **{str(k): str(v) for k, v in (env or {}).items()}}
    return jinja2.Environment().from_string(text).render(env_var=lambda key, default=None: environ.get(key, default),
                                                         user=getpass.getuser)


def edit_one_model(folders: list[Path]) -> str | None:
    """Add a column to the first SQL model (by file name) whose query starts `SELECT`: a non-breaking
    change for both categorizers to judge; the edited file, relative to its folder, or None."""
    for folder in folders:
        for path in sorted((folder / "models").rglob("*.sql")):
            text = path.read_text()
            match = re.search(r"\)\s*;\s*(SELECT(\s+DISTINCT)?)\s", text, re.I)
            if match and "jinja" not in text.lower():
                path.write_text(text[:match.end(1)] + " 1 AS compat_edit," + text[match.end(1):])
                return str(path.relative_to(folder.parent))
    return None


def probe(python: Path | str, engine: str, folders: list[Path], project: Project, scratch: Path,
          mode: str = "") -> dict:
    """Run probe.py for `engine`; the project's requirements installed into a folder of this run only
    (on the import path of the probe, never into meshbot's or SQLMesh's virtualenv)."""
    env = {**os.environ, **{str(k): str(v) for k, v in project.env.items()}}
    if engine == "meshbot":   # Spark inside the probe, gone with it: no warm engine left behind per scratch copy
        env["MESHBOT_WARM_ENGINE"] = "0"
    site = scratch / f"{engine}-site"
    if project.requirements and site.exists():   # installed by this engine's first probe of the run
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH", "")]))
    elif project.requirements:
        pins = scratch / f"{engine}-pins.txt"
        # pinned to what the engine's virtualenv has, so the folder shadows none of its own packages
        frozen = subprocess.run([str(python), "-m", "pip", "freeze"], capture_output=True, text=True, check=True)
        pins.write_text("\n".join(line for line in frozen.stdout.splitlines() if "==" in line) + "\n")
        packages = [r for r in project.requirements if not r.startswith("./")]
        if packages:
            subprocess.run([str(python), "-m", "pip", "install", "-q", "--target", str(site), "-c", str(pins),
                            *packages], check=True)
        # `./path`: a package of the project's repository (a materializations package, as a user installs it
        # beside the engine), without its dependencies: it names `sqlmesh`, which must stay the engine's own
        local = [str(project.checkout / r) for r in project.requirements if r.startswith("./")]
        if local:
            subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), *local],
                           check=True)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH", "")]))
    out = scratch / f"{engine}{'-' + mode if mode else ''}.json"
    command = [str(python), str(HERE / "probe.py"), engine, os.pathsep.join(map(str, folders)), project.start,
               project.end, project.run_at, str(out), *([mode] if mode else [])]
    result = subprocess.run(command, cwd=folders[0], capture_output=True, text=True, timeout=3600, env=env)
    if not out.exists():
        tail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        return {"models": {}, "tests": {}, "audits": None, "error": " | ".join(tail) or f"exit {result.returncode}"}
    return json.loads(out.read_text())


def same_number(a: object, b: object) -> bool:
    if a is None or b is None:
        return a is b
    return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)


def verdict(ours: dict | None, theirs: dict, sqlmesh_error: str | None = None) -> str:
    """'equal', what differs first, or why SQLMesh has nothing to compare (`SQLMesh fails: ...`, its error for
    the model, else the first error of its plan), kept apart from what meshbot does differently."""
    if ours is None:
        return "missing on meshbot"
    if "error" in theirs:
        mine = f"meshbot: {ours['error']}" if "error" in ours else "meshbot runs it"
        if theirs.get("failed"):
            return f"SQLMesh fails: {theirs['failed']}; {mine}"
        if sqlmesh_error:   # the model ran, or was never reached, but the plan failed: no view to read
            return f"SQLMesh's plan fails: {sqlmesh_error}; {mine}"
        return "SQLMesh did not run it" if "error" in ours else "meshbot only"
    if "error" in ours:
        return f"meshbot: {ours['error']}"
    if ours["rows"] != theirs["rows"]:
        return f"rows {ours['rows']} vs {theirs['rows']}"
    grains = (ours.get("distinct_grain"), theirs.get("distinct_grain"))
    if None not in grains and grains[0] != grains[1]:   # a grain one probe cannot read is not compared
        return f"distinct grain {ours.get('distinct_grain')} vs {theirs.get('distinct_grain')}"
    mine = {k.lower(): v for k, v in ours["sums"].items()}
    for column, value in theirs["sums"].items():
        if column.lower() not in mine:
            return f"column {column}: not numeric (or absent) on meshbot"
        if not same_number(mine[column.lower()], value):
            return f"sum of {column} {mine[column.lower()]} vs {value}"
    return "equal"


def compare(project: Project, venv: Path, keep: Path | None) -> list[str]:
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f"compat-{project.name}-", dir=keep))
    their_folders, our_folders = prepared_copy(project, "sqlmesh", scratch), prepared_copy(project, "meshbot", scratch)
    theirs = probe(sqlmesh_python(venv), "sqlmesh", their_folders, project, scratch)
    ours = probe(sys.executable, "meshbot", our_folders, project, scratch)
    edited = edit_one_model(their_folders)
    if edited is not None and edit_one_model(our_folders) is not None:
        their_categories = probe(sqlmesh_python(venv), "sqlmesh", their_folders, project, scratch, "categories")
        our_categories = probe(sys.executable, "meshbot", our_folders, project, scratch, "categories")
    else:
        their_categories = our_categories = {"categories": {}, "error": "no SQL model to edit"}
    lines = [f"## {project.name} (as of {project.run_at})", "",
             "| model | kind | SQLMesh rows | meshbot | verdict |", "| --- | --- | ---: | --- | --- |"]
    for name, entry in sorted(theirs["models"].items()):
        mine = ours["models"].get(name)
        rows = entry.get("rows", "error")
        lines.append(f"| {name} | {entry.get('kind', '')} | {rows} | {mine.get('rows', 'error') if mine else '-'} "
                     f"| {_cell(verdict(mine, entry, theirs['error']))} |")
    if not theirs["models"] and theirs["error"]:   # SQLMesh did not load the project: one row says why
        lines.append(f"| (every model) | | - | {len(ours['models']) or '-'} | "
                     f"{_cell('SQLMesh fails: ' + theirs['error'])} |")
    if theirs["error"]:
        print(f"{project.name}: SQLMesh fails: {theirs['error']}", file=sys.stderr, flush=True)
    equal = sum(1 for name, entry in theirs["models"].items() if "error" not in entry
                and verdict(ours["models"].get(name), entry) == "equal")
    ran = sum(1 for entry in theirs["models"].values() if "error" not in entry)
    tests_same = sum(1 for test, result in theirs["tests"].items() if ours["tests"].get(test) == result)
    lines += ["", f"- models SQLMesh ran: {ran}; equal on meshbot: {equal}",
              f"- unit tests with the same verdict: {tests_same} of {len(theirs['tests'])}",
              f"- audits: SQLMesh {theirs['audits']}, meshbot {ours['audits']}",
              f"- categories after adding a column to {edited}: {_categories(our_categories, their_categories)}",
              f"- SQLMesh fails: {theirs['error']}" if theirs["error"] else "- SQLMesh's plan: no error",
              f"- meshbot's first error: {ours['error'] or 'none'}",
              f"- scratch: {scratch}", ""]
    if keep is None:
        shutil.rmtree(scratch, ignore_errors=True)
    return lines


def _cell(text: str) -> str:
    """Text as one Markdown table cell: a `|` would end it."""
    return text.replace("|", "\\|").replace("\n", " ")


def _day(text: str) -> str:
    """A window's date; `today` is the day the harness runs (projects whose models have no start)."""
    return datetime.date.today().isoformat() if text == "today" else text


def _categories(ours: dict, theirs: dict) -> str:
    """'all N equal', or each model whose category differs (meshbot's vs SQLMesh's)."""
    if theirs.get("error") or ours.get("error"):
        return f"SQLMesh: {theirs.get('error') or 'ok'}; meshbot: {ours.get('error') or 'ok'}"
    mine, their = ours["categories"], theirs["categories"]
    differ = [f"{name} {mine.get(name, '-')} vs {their.get(name, '-')}" for name in sorted(set(mine) | set(their))
              if mine.get(name) != their.get(name)]
    return "; ".join(differ) if differ else f"all {len(their)} equal"


def listed(path: Path, only: str | None, clones: Path, mirror: Path | None) -> list[Project]:
    projects = []
    for entry in tomllib.loads(path.read_text())["project"]:
        if only and entry["name"] != only:
            continue
        checkout = clones / f"{entry['repo'].replace('/', '+')}@{entry['commit'][:12]}"
        if not checkout.exists():
            source = (str(mirror / entry["repo"].replace("/", "+") / "repo") if mirror is not None
                      else f"https://github.com/{entry['repo']}")
            subprocess.run(["git", "clone", "--quiet", "--no-checkout", source, str(checkout)], check=True)
            subprocess.run(["git", "-C", str(checkout), "checkout", "--quiet", entry["commit"]], check=True)
        projects.append(Project(name=entry["name"], folder=checkout / entry.get("folder", ""),
                                start=entry.get("start", "2024-01-01"), end=_day(entry.get("end", "2024-01-07")),
                                execution_time=entry.get("execution_time", ""), gateway=entry.get("gateway", {}),
                                env=entry.get("env", {}), drop_gateways=entry.get("drop_gateways", False),
                                requirements=tuple(entry.get("requirements", ())),
                                repositories=tuple(entry.get("repositories", ())), checkout=checkout))
    return projects


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("project", nargs="?", type=Path, help="A folder holding a SQLMesh project.")
    parser.add_argument("--list", type=Path, help="A projects.toml (repository, commit, folder, window).")
    parser.add_argument("--only", help="With --list: this project only.")
    parser.add_argument("--clones", type=Path, default=Path.home() / ".cache" / "meshbot-compat" / "clones",
                        help="Where --list clones repositories.")
    parser.add_argument("--mirror", type=Path, help="Clone from <mirror>/<owner>+<name>/repo instead of GitHub.")
    parser.add_argument("--start", default="2024-01-01")
    parser.add_argument("--end", default="2024-01-07")
    parser.add_argument("--execution-time", default="")
    parser.add_argument("--sqlmesh-venv", type=Path, default=DEFAULT_VENV)
    parser.add_argument("--keep", type=Path, help="Keep the scratch copies under this folder.")
    args = parser.parse_args()
    if args.list:
        args.clones.mkdir(parents=True, exist_ok=True)
        projects = listed(args.list, args.only, args.clones, args.mirror)
    elif args.project:
        projects = [Project(name=args.project.name, folder=args.project.resolve(), start=args.start, end=args.end,
                            execution_time=args.execution_time)]
    else:
        parser.error("give a project folder or --list")
    for project in projects:
        print("\n".join(compare(project, args.sqlmesh_venv, args.keep)), flush=True)


if __name__ == "__main__":
    main()
