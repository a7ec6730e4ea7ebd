"""A seed's CSV against its model's `columns`, checked at plan time with the standard library (no Spark, no pandas).

Refused, naming the CSV's file and line (or the model's file and line) and the column: a record with more fields
than the header (SQLMesh: "Expected 3 fields in line 3, saw 4"), a declared column the header lacks (SQLMesh,
when the batch runs: "Seed model 's.p' has missing columns: {'name'}") and a number or boolean that does not fit
its column's type (SQLMesh, when the batch runs: DuckDB's "Could not convert string 'x1' to INT32", no line).
A shorter record is read with NULLs, as pandas reads it for SQLMesh. Dates and timestamps are checked when
the seed is loaded (bot.spark.materialize.seed), with the same message: Spark's own text formats decide them.
"""

from __future__ import annotations

import csv
import json
import re
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Iterator, Sequence

from bot.errors import ConfigError, EngineError

# csv_settings keys SQLMesh accepts, passed to pandas.read_csv under these names.
PANDAS_SETTINGS = {"delimiter": "sep", "quotechar": "quotechar", "doublequote": "doublequote",
                   "escapechar": "escapechar", "skipinitialspace": "skipinitialspace",
                   "lineterminator": "lineterminator", "encoding": "encoding",
                   "na_values": "na_values", "keep_default_na": "keep_default_na", "header": "header"}
# what pandas.read_csv reads as NULL unless keep_default_na is false
_PANDAS_NA = frozenset({"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
                        "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"})
_INTEGER_RANGES = {"tinyint": 2 ** 7, "smallint": 2 ** 15, "int": 2 ** 31, "bigint": 2 ** 63}
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[dDfF]?")
_SPECIAL_FLOATS = frozenset({"nan", "inf", "+inf", "-inf", "infinity", "+infinity", "-infinity"})
_BOOLEANS = frozenset({"t", "true", "y", "yes", "1", "f", "false", "n", "no", "0"})
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)|decimal", re.I)
_SHOWN_CHARS = 80


def pandas_options(settings: Sequence[tuple[str, Any]], *, path: Path) -> dict[str, Any]:
    """pandas.read_csv keyword arguments from a model's csv_settings.

    >>> pandas_options((("delimiter", "|"), ("header", False)), path=Path("s.csv"))
    {'sep': '|', 'header': None}
    """
    options: dict[str, Any] = {}
    for key, value in settings:
        name = PANDAS_SETTINGS.get(key.lower())
        if name is None:
            raise EngineError(f"{path}: unknown csv_settings key `{key}` "
                              f"(known: {', '.join(sorted(PANDAS_SETTINGS))})")
        if name == "header":
            value = 0 if value in (True, "true", "TRUE", 1, "1") else None
        elif name == "na_values" and isinstance(value, str):
            value = json.loads(value) if value[:1] in ("[", "{") else [value]
        options[name] = value
    return options


def _records(path: Path, options: dict[str, Any]) -> Iterator[tuple[int, list[str]]]:
    """(line the record starts on, its fields) for every non-blank record, as pandas reads them."""
    with path.open(newline="", encoding=options.get("encoding") or "utf-8") as handle:
        reader = csv.reader(handle, delimiter=options.get("sep", ","), quotechar=options.get("quotechar", '"'),
                            doublequote=options.get("doublequote", True), escapechar=options.get("escapechar"),
                            skipinitialspace=options.get("skipinitialspace", False))
        end = 0
        for record in reader:
            start, end = end + 1, reader.line_num
            # a blank line is a record of its own, [], which pandas skips, and so is a line of spaces only
            if record and not (len(record) == 1 and not record[0].strip()):
                yield start, record


def record_lines(path: Path, options: dict[str, Any]) -> list[int] | None:
    """The line each data record of the CSV starts on (1-based, the header counted), as pandas reads it
    (blank lines skipped, quoted fields may span lines); None when the csv module cannot read it alike."""
    try:
        starts = [line for line, _ in _records(path, options)]
    except (OSError, UnicodeError, csv.Error, TypeError):
        return None
    return starts[1:] if options.get("header", 0) == 0 else starts


def _fits(value: str, spark_type: str) -> bool:
    """Whether Spark's cast of the text `value` into `spark_type` gives a value (bot.spark.casts'
    fitting rule: a number in exponent notation or with a zero fraction fits an integer column)."""
    base = spark_type.lower().replace(" ", "")
    text = value.strip()
    if base in _INTEGER_RANGES:
        if not _NUMBER.fullmatch(text):
            return False
        number = Decimal(text.rstrip("dDfF"))
        limit = _INTEGER_RANGES[base]
        return number == number.to_integral_value() and -limit <= number < limit
    if base in ("float", "double"):
        return bool(_NUMBER.fullmatch(text)) or text.lower() in _SPECIAL_FLOATS
    if base == "boolean":
        return text.lower() in _BOOLEANS
    decimal = _DECIMAL.fullmatch(base)
    if decimal:
        if not _NUMBER.fullmatch(text):
            return False
        precision, scale = (int(decimal.group(1)), int(decimal.group(2))) if decimal.group(1) else (10, 0)
        try:
            number = Decimal(text.rstrip("dDfF")).quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP)
        except InvalidOperation:
            return False
        return abs(number) < Decimal(10) ** (precision - scale)
    return True   # text, dates, timestamps, nested types: checked when loaded


def check_seed(*, model_name: str, model_path: Path, model_line: int, csv_path: Path,
               settings: Sequence[tuple[str, Any]], columns: Sequence[tuple[str, str]]) -> None:
    """Raise a ConfigError for the first thing in the seed's CSV that does not fit its declared `columns`
    ((name, Spark type)); nothing when the CSV cannot be read here (its load then says why)."""
    options = pandas_options(settings, path=csv_path)
    if isinstance(options.get("na_values"), dict):
        return   # per-column NULL markers: left to pandas at load
    nulls = (set(_PANDAS_NA) if options.get("keep_default_na", True) else set()) | \
        {str(v) for v in options.get("na_values") or ()}
    has_header = options.get("header", 0) == 0
    try:
        records = _records(csv_path, options)
        header: list[str] | None = None
        positions: list[tuple[int, str, str]] = []
        for line, fields in records:
            if header is None:
                header = fields if has_header else [str(i) for i in range(len(fields))]
                positions = _positions(header if has_header else None, columns, model_name=model_name,
                                       model_path=model_path, model_line=model_line, csv_path=csv_path)
                if has_header:
                    continue
            if len(fields) > len(header):
                raise ConfigError(f"seed of model `{model_name}`: this record has {len(fields)} fields, the "
                                  f"header {len(header)} ({', '.join(header)}); nothing was loaded",
                                  path=csv_path, line=line)
            for index, name, spark_type in positions:
                value = fields[index] if index < len(fields) else ""
                if value in nulls or _fits(value, spark_type):
                    continue
                shown = value if len(value) <= _SHOWN_CHARS else value[:_SHOWN_CHARS] + "..."
                raise ConfigError(f"seed of model `{model_name}`: column `{name}` is {spark_type.upper()}, and "
                                  f"the value {shown!r} does not fit it; nothing was loaded (fix the value, or "
                                  "change the column's type in the model's `columns`)", path=csv_path, line=line)
    except (OSError, UnicodeError, csv.Error, TypeError):
        return


def _positions(header: list[str] | None, columns: Sequence[tuple[str, str]], *, model_name: str,
               model_path: Path, model_line: int, csv_path: Path) -> list[tuple[int, str, str]]:
    """(field index, column, Spark type) per declared column: by name (any case) under a header, else
    by position."""
    if header is None:
        return [(i, name, kind) for i, (name, kind) in enumerate(columns)]
    # SQLMesh reads each header name as an identifier (sqlglot's normalize_identifiers): `a, b` names `b`
    by_name = {field.strip().lower(): i for i, field in enumerate(header)}
    missing = [name for name, _ in columns if name.lower() not in by_name]
    if missing:
        raise ConfigError(f"model `{model_name}` declares column{'s' if len(missing) > 1 else ''} "
                          f"{', '.join(f'`{m}`' for m in missing)}, which the header of its seed {csv_path} "
                          f"lacks (its columns: {', '.join(header)})", path=model_path, line=model_line)
    return [(by_name[name.lower()], name, kind) for name, kind in columns]
