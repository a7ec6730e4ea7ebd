"""Golden fingerprints: every model of the example project (`meshbot init`) and of the SQLMesh projects
under tests/fixtures/, fingerprinted as a plan fingerprints them, against tests/golden/fingerprints.json.

A fingerprint that moves while the files stay the same gives every unchanged model a new snapshot, and a
new table to backfill where its data version moved: an upgrade of meshbot or of sqlglot must never do that
silently. Computed at plan time from the files alone: no Spark, no state."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import sqlglot

from bot.context import Context
from bot.fingerprint import FINGERPRINT_SCHEME, fingerprint_models
from bot.project.example import write_example

TESTS = Path(__file__).resolve().parent
GOLDEN = TESTS / "golden" / "fingerprints.json"
UPDATE = os.environ.get("MESHBOT_UPDATE_GOLDEN") == "1"
FIXTURE_PROJECTS = sorted(path.parent.relative_to(TESTS).as_posix()
                          for pattern in ("config.yaml", "config.yml", "config.py")
                          for path in (TESTS / "fixtures").rglob(pattern))
PROJECTS = ["example", *FIXTURE_PROJECTS]
FIELDS = ("data_hash", "metadata_hash", "parent_data_hash", "parent_metadata_hash", "identifier", "version")
REGENERATE = "MESHBOT_UPDATE_GOLDEN=1 .venv/bin/python -m pytest -q -n 0 tests/test_golden_fingerprints.py"


def fingerprints_of(project: str, tmp_path: Path) -> dict[str, dict[str, str]]:
    """Each model's fingerprint, its identifier and the version a new snapshot of it gets (its data
    version), for a copy of the project (a plan writes .meshbot/cache into the project)."""
    root = tmp_path / "project"
    if project == "example":
        write_example(root)
    else:
        shutil.copytree(TESTS / project, root)
    context = Context(root, read_cache=False)
    found = fingerprint_models(context.models, context.project.dag.order, context.rendered_queries())
    return {name: {"data_hash": fp.data_hash, "metadata_hash": fp.metadata_hash,
                   "parent_data_hash": fp.parent_data_hash, "parent_metadata_hash": fp.parent_metadata_hash,
                   "identifier": fp.identifier, "version": fp.data_version}
            for name, fp in sorted(found.items())}


def _golden() -> dict:
    return json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {"sqlglot": None, "projects": {}}


def _changes(expected: dict[str, dict[str, str]], actual: dict[str, dict[str, str]]) -> list[str]:
    lines = [f"  {name}: no longer in the project" for name in sorted(expected.keys() - actual.keys())]
    lines += [f"  {name}: new, not in the golden file" for name in sorted(actual.keys() - expected.keys())]
    for name in sorted(expected.keys() & actual.keys()):
        moved = [f"{field} {expected[name].get(field)} -> {actual[name][field]}"
                 for field in FIELDS if expected[name].get(field) != actual[name][field]]
        if moved:
            lines.append(f"  {name}: {', '.join(moved)}")
    return lines


@pytest.mark.parametrize("project", PROJECTS)
def test_fingerprints_match_the_golden_file(project, tmp_path):
    actual = fingerprints_of(project, tmp_path)
    assert actual, f"{project}: no model"
    golden = _golden()
    if UPDATE:   # one writer per project: -n 0 (the command below) writes them one after another
        moved = _changes(golden["projects"].get(project, actual), actual)
        assert not moved or golden.get("fingerprint_scheme", 1) < FINGERPRINT_SCHEME, (
            f"{project}'s fingerprints moved under the same FINGERPRINT_SCHEME ({FINGERPRINT_SCHEME}): bump it in "
            "bot/fingerprint.py, so that `meshbot migrate` re-keys the snapshots teams have stored, then regenerate:\n"
            + "\n".join(moved))
        golden["sqlglot"] = sqlglot.__version__
        golden["projects"][project] = actual
        if project == PROJECTS[-1]:
            golden["fingerprint_scheme"] = FINGERPRINT_SCHEME
        GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    expected = golden["projects"].get(project)
    assert expected is not None, f"{project} has no golden fingerprints yet: {REGENERATE}"
    changes = _changes(expected, actual)
    assert not changes, (
        f"The fingerprints of {project} moved, its files unchanged (golden file written with sqlglot "
        f"{golden['sqlglot']}, this is sqlglot {sqlglot.__version__}):\n" + "\n".join(changes) + "\n"
        "Every environment's next plan would take these models for changed ones: new snapshots, and where the "
        "version moved, new tables backfilled from scratch. A deliberate change of how fingerprints are computed "
        "(bot/fingerprint.py, bot/snapshot.py) bumps FINGERPRINT_SCHEME in bot/fingerprint.py: `meshbot migrate` then "
        "re-keys every stored snapshot from its stored definition and rendered query (bot/state/rekey.py); a change "
        "of the rendered SQL itself (a new sqlglot, a renderer edit) is carried over for the snapshots whose "
        "definitions are the checkout's models, when `meshbot migrate` runs in the project. Once the move is "
        f"deliberate, regenerate the golden file and review its diff: {REGENERATE}")


def test_the_golden_file_has_the_projects_there_are():
    """A fixture project removed (or renamed) leaves its golden entry behind: so that a new one gets one too,
    the file lists exactly the projects this module fingerprints."""
    golden = _golden()
    assert sorted(golden["projects"]) == sorted(PROJECTS), f"regenerate: {REGENERATE}"
    assert golden["sqlglot"] is not None
    assert golden.get("fingerprint_scheme") == FINGERPRINT_SCHEME, f"regenerate: {REGENERATE}"


def test_a_plan_of_the_example_stores_the_golden_identifiers_and_versions(tmp_path):
    """The golden values are those of the snapshots a first plan of the example writes to state (planned,
    not applied: no Spark)."""
    write_example(tmp_path / "shop")
    plan = Context(tmp_path / "shop").plan("prod")
    golden = _golden()["projects"]["example"]
    assert {s.name: (s.identifier, s.version) for s in plan.new_snapshots} == \
        {name: (fp["identifier"], fp["version"]) for name, fp in golden.items()}
    assert {s.name: s.fingerprint.data_hash for s in plan.new_snapshots} == \
        {name: fp["data_hash"] for name, fp in golden.items()}
