"""Parse unit test YAML files (tests/**/test*.yaml) into frozen UnitTest values; malformed files are ConfigErrors."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from bot.errors import ConfigError
from bot.project.files import read_yaml_document
from bot.project.catalogs import Catalogs
from bot.project.sqltext import normalize_name


@dataclass(frozen=True)
class TestData:
    """Rows given inline (or as CSV), or a query producing them; `partial` only for outputs."""

    __test__ = False

    rows: tuple[dict[str, Any], ...] = ()
    query: str | None = None
    partial: bool = False

    @property
    def columns(self) -> tuple[str, ...]:
        """Column names in order of first appearance across rows."""
        return tuple(dict.fromkeys(c for row in self.rows for c in row))


@dataclass(frozen=True)
class UnitTest:
    """One named test: the model under test, its inputs, expected outputs and variables."""

    __test__ = False

    name: str
    path: Path
    model: str
    line: int = 1
    description: str | None = None
    inputs: tuple[tuple[str, TestData], ...] = ()        # (normalized upstream name, data)
    query: TestData | None = None                         # expected output of the whole query
    ctes: tuple[tuple[str, TestData], ...] = ()           # expected output of named CTEs
    start: Any = None
    end: Any = None
    execution_time: Any = None
    variables: dict[str, Any] = field(default_factory=dict)


_TEST_KEYS = {"model", "description", "inputs", "outputs", "vars", "schema", "gateway"}
_TIME_VARS = ("start", "end", "execution_time")


def load_test_files(paths: Iterable[Path], catalogs: Catalogs = Catalogs()) -> list[UnitTest]:
    """Every test of every file, in file then definition order; model names lose the default catalog."""
    return [test for path in paths for test in load_test_file(Path(path), catalogs)]


def load_test_file(path: Path, catalogs: Catalogs = Catalogs()) -> list[UnitTest]:
    """Parse one YAML file; an empty file holds no tests."""
    document = read_yaml_document(path)
    root, data = document.node, document.data
    if data is None:
        return []
    if not isinstance(data, dict):
        raise ConfigError("a test file must map test names to test definitions", path=path, line=1)
    lines = {str(k.value): k.start_mark.line + 1 for k, _ in root.value} if root is not None else {}
    return [parse_test(str(name), body, path=path, line=lines.get(str(name), 1), catalogs=catalogs)
            for name, body in data.items()]


def parse_test(name: str, body: Any, *, path: Path, line: int = 1, catalogs: Catalogs = Catalogs()) -> UnitTest:
    """One test definition (the value under its name)."""

    def fail(message: str) -> ConfigError:
        return ConfigError(f"test `{name}`: {message}", path=path, line=line)

    if not isinstance(body, dict):
        raise fail("expected a mapping with `model`, `inputs` and `outputs`")
    unknown = sorted(set(body) - _TEST_KEYS)
    if unknown:
        raise fail(f"unknown key(s) {', '.join(unknown)}")
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise fail("`model` is required and must be a model name")
    inputs = body.get("inputs") or {}
    outputs = body.get("outputs")
    variables = body.get("vars") or {}
    if not isinstance(inputs, dict):
        raise fail("`inputs` must map upstream model names to rows")
    if not isinstance(outputs, dict) or not (outputs.get("query") is not None or outputs.get("ctes")):
        raise fail("`outputs` must give `query` and/or `ctes`")
    if not isinstance(variables, dict):
        raise fail("`vars` must be a mapping")
    ctes = outputs.get("ctes") or {}
    if not isinstance(ctes, dict):
        raise fail("`outputs.ctes` must map CTE names to rows")
    return UnitTest(
        name=name, path=path, line=line, description=body.get("description"),
        model=catalogs.reference(normalize_name(model.strip()), path=path, owner=f"test `{name}`", line=line),
        inputs=tuple((catalogs.reference(normalize_name(str(k)), path=path, owner=f"test `{name}`", line=line),
                      _data(v, f"inputs.{k}", fail)) for k, v in inputs.items()),
        query=_data(outputs["query"], "outputs.query", fail) if outputs.get("query") is not None else None,
        ctes=tuple((str(k).lower(), _data(v, f"outputs.ctes.{k}", fail)) for k, v in ctes.items()),
        start=variables.get("start"), end=variables.get("end"),
        execution_time=variables.get("execution_time"),
        variables={str(k): v for k, v in variables.items() if k not in _TIME_VARS},
    )


def _data(value: Any, where: str, fail) -> TestData:
    """`[rows]`, `{rows: [...], partial}`, `{format: csv, csv: "..."}` or `{query: "SELECT ..."}`."""
    if isinstance(value, list):
        return TestData(rows=_rows(value, where, fail))
    if not isinstance(value, dict):
        raise fail(f"`{where}` must be a list of rows or a mapping with `rows`, `csv` or `query`")
    partial = bool(value.get("partial", False))
    if value.get("query") is not None:
        if not isinstance(value["query"], str):
            raise fail(f"`{where}.query` must be SQL text")
        return TestData(query=value["query"], partial=partial)
    if value.get("format", "csv" if "csv" in value else None) == "csv" and "csv" in value:
        return TestData(rows=_csv_rows(value["csv"], where, fail), partial=partial)
    if "rows" not in value:
        raise fail(f"`{where}` needs `rows`, `csv` or `query`")
    return TestData(rows=_rows(value["rows"] or [], where, fail), partial=partial)


def _rows(value: Any, where: str, fail) -> tuple[dict[str, Any], ...]:
    if not isinstance(value, list) or not all(isinstance(row, dict) for row in value):
        raise fail(f"`{where}` rows must be a list of mappings (column: value)")
    return tuple({str(k): v for k, v in row.items()} for row in value)


def _csv_rows(text: Any, where: str, fail) -> tuple[dict[str, Any], ...]:
    if not isinstance(text, str):
        raise fail(f"`{where}.csv` must be CSV text with a header line")
    reader = csv.DictReader(io.StringIO(text.strip()))
    return tuple({k.strip(): _csv_value(v) for k, v in row.items()} for row in reader)


def _csv_value(text: str | None) -> Any:
    """CSV cells: empty is NULL, numbers become numbers, anything else stays text.

    >>> [_csv_value(v) for v in ("", "3", "2.5", "a")]
    [None, 3, 2.5, 'a']
    """
    if text is None or text.strip() == "":
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text
