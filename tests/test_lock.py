"""The lock files (requirements/*.txt, written by requirements/lock) agree with pyproject.toml: every
dependency pinned within its range and hashed, sqlglot at its exact pin, one version of a package in all
four, and each file with the PySpark of its extra; CI installs from the lock."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]
LOCKS = {"base": None, "connect": "connect", "spark": "spark", "test": "test"}   # file -> the extra it locks
_PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>\S+)\s*(?:;\s*(?P<marker>[^\\]+?))?\s*\\?$")


@dataclass(frozen=True)
class Pin:
    name: str
    version: Version
    marker: str | None
    hashes: int


def read_lock(path: Path) -> list[Pin]:
    """The pins of a hashed requirements file as uv and pip-compile write it: `name==version [; marker] \\`
    followed by its `--hash=sha256:` lines."""
    pins: list[Pin] = []
    entry: dict | None = None
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("--hash="):
            assert entry is not None and re.fullmatch(r"--hash=sha256:[0-9a-f]{64}( \\)?", stripped), line
            entry["hashes"] += 1
            continue
        match = _PIN.match(stripped)
        assert match, f"{path.name}: not a `name==version` pin: {line}"
        if entry is not None:
            pins.append(Pin(**entry))
        entry = {"name": canonicalize_name(match["name"]), "version": Version(match["version"]),
                 "marker": match["marker"], "hashes": 0}
    if entry is not None:
        pins.append(Pin(**entry))
    return pins


def direct_requirements(extra: str | None) -> list[Requirement]:
    """meshbot's own dependencies with those of `extra`, following `meshbot[...]` inside an extra."""
    requirements = [Requirement(text) for text in PROJECT["dependencies"]]
    pending, seen = [extra] if extra else [], set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        for requirement in map(Requirement, PROJECT["optional-dependencies"][name]):
            if canonicalize_name(requirement.name) == canonicalize_name(PROJECT["name"]):
                pending.extend(requirement.extras)
            else:
                requirements.append(requirement)
    return requirements


def pins_by_name(lock: str) -> dict[str, list[Pin]]:
    by_name: dict[str, list[Pin]] = {}
    for pin in read_lock(ROOT / "requirements" / f"{lock}.txt"):
        by_name.setdefault(pin.name, []).append(pin)
    return by_name


def test_the_reader_reads_a_hashed_requirements_file(tmp_path):
    lock = tmp_path / "lock.txt"
    lock.write_text("# header\nnumpy==2.4.6 ; python_full_version < '3.12' \\\n"
                    f"    --hash=sha256:{'a' * 64} \\\n    --hash=sha256:{'b' * 64}\n    # via pandas\n"
                    f"Py_YAML==6.0.4 \\\n    --hash=sha256:{'c' * 64}\n")
    assert read_lock(lock) == [Pin("numpy", Version("2.4.6"), "python_full_version < '3.12'", 2),
                               Pin("py-yaml", Version("6.0.4"), None, 1)]


def test_direct_requirements_follow_the_extras_that_name_meshbot():
    names = {canonicalize_name(r.name) for r in direct_requirements("test")}
    assert {"sqlglot", "pyspark", "pytest", "packaging"} <= names and "meshbot" not in names
    assert "pyspark" not in {canonicalize_name(r.name) for r in direct_requirements(None)}


@pytest.mark.parametrize("lock, extra", LOCKS.items())
def test_every_direct_dependency_is_pinned_within_its_range(lock, extra):
    pins = pins_by_name(lock)
    for requirement in direct_requirements(extra):
        name = canonicalize_name(requirement.name)
        assert name in pins, f"requirements/{lock}.txt lacks {requirement}: run requirements/lock"
        for pin in pins[name]:
            assert requirement.specifier.contains(pin.version, prereleases=True), \
                f"requirements/{lock}.txt pins {name}=={pin.version} outside `{requirement}`: run requirements/lock"


@pytest.mark.parametrize("lock", LOCKS)
def test_every_pin_is_hashed_and_meshbot_is_not_in_the_lock(lock):
    """`pip install --require-hashes` refuses a pin without a hash; meshbot goes in after, with --no-deps."""
    pins = pins_by_name(lock)
    assert canonicalize_name(PROJECT["name"]) not in pins
    assert [pin.name for versions in pins.values() for pin in versions if pin.hashes == 0] == []


def test_sqlglot_is_pinned_exactly_and_the_lock_has_that_version():
    """Fingerprints hash the SQL sqlglot generates: a sqlglot other than the pinned one may re-version
    unchanged models (tests/test_golden_fingerprints.py)."""
    [sqlglot] = [Requirement(r) for r in PROJECT["dependencies"] if canonicalize_name(Requirement(r).name) == "sqlglot"]
    [spec] = sqlglot.specifier
    assert spec.operator == "==" and "*" not in spec.version, f"sqlglot must be pinned exactly, not `{sqlglot}`"
    assert sqlglot.extras == {"c"}
    for lock in LOCKS:
        pins = pins_by_name(lock)
        for name in ("sqlglot", "sqlglotc"):   # [c]: sqlglotc of the same version
            assert [str(pin.version) for pin in pins[name]] == [spec.version], (lock, name)


def test_one_version_of_each_package_in_every_lock():
    """base, connect and spark take their versions from test.txt (-c): what CI tests is what the action installs."""
    test = pins_by_name("test")
    for lock in ("base", "connect", "spark"):
        for name, pins in pins_by_name(lock).items():
            if name in test:
                # (markers may differ: in base.txt cffi is needed on CPython only, in test.txt on PyPy too)
                assert {p.version for p in pins} <= {p.version for p in test[name]}, (lock, name)


def test_each_lock_has_the_pyspark_of_its_extra():
    """Both ship the `pyspark` package: a lock with the two would let one overwrite the other."""
    assert {lock: {"pyspark", "pyspark-client"} & set(pins_by_name(lock)) for lock in LOCKS} == {
        "base": set(), "connect": {"pyspark-client"}, "spark": {"pyspark"}, "test": {"pyspark"}}


def test_the_lock_is_written_with_the_uv_the_action_pins():
    pinned = re.search(r'"uv==(\d+\.\d+\.\d+)"', (ROOT / "action.yml").read_text())
    assert pinned and f'"uv=={pinned[1]}"' in (ROOT / "requirements/lock").read_text()
    for lock in LOCKS:
        assert (ROOT / "requirements" / f"{lock}.txt").read_text().splitlines()[1] == "#    requirements/lock"


def test_ci_installs_the_lock_then_meshbot_and_runs_the_readme_test_command():
    lines = [line.strip() for line in (ROOT / ".ci/run").read_text().splitlines()
             if line.strip() and not line.lstrip().startswith("#")]
    installs = [line for line in lines if " pip install " in line]
    assert installs[-2:] == [".venv/bin/python -m pip install --quiet --require-hashes -r requirements/test.txt",
                             ".venv/bin/python -m pip install --quiet --no-deps -e ."]
    assert lines[-1] == ".venv/bin/python -m pytest -q -n 2"
    readme = (ROOT / "README.md").read_text()
    assert "pip install --require-hashes -r requirements/test.txt \\\n  && .venv/bin/pip install --no-deps -e ." in readme
