"""A seed's CSV that does not fit its model's `columns` is refused at plan time (issue 44), before Spark starts,
naming the CSV's file and line (or the model's) and the column; the plan exits 1 and writes nothing.

SQLMesh 0.236.4 on DuckDB, for the same files: a value that does not fit fails the batch ("Could not convert
string 'x1' to INT32", no line; exit 1); a record with more fields than the header fails the plan ("Expected
3 fields in line 3, saw 4", no file); a declared column the header lacks fails the batch ("Seed model 's.p'
has missing columns: {'name'}"). It reads ' 12 ', '1e1' and '2.0' into an INT column as 12, 10 and 2, a
shorter record with NULLs, and drops a CSV column that is not declared: all of those plan here too."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from bot.cli import cli
from bot.context import Context
from bot.errors import ConfigError
from project_files import DUCKDB_DIALECT_CONFIG, write_files

CONFIG = DUCKDB_DIALECT_CONFIG
MODEL = "MODEL (name s.p, kind SEED (path '../seeds/p.csv'), columns (id INT, amount {amount}, name TEXT));\n"


def _project(tmp_path, csv: str, amount: str = "INT"):
    return write_files(tmp_path / "p", {"config.yaml": CONFIG, "models/p.sql": MODEL.format(amount=amount),
                                        "seeds/p.csv": csv})


def test_a_value_that_does_not_fit_stops_the_plan_with_its_line_and_column_and_nothing_is_written(tmp_path):
    root = _project(tmp_path, "id,amount,name\n1,10,a\n2,x1,b\n3,30,c\n")
    done = CliRunner().invoke(cli, ["-p", str(root), "plan", "--auto-apply", "--no-prompts"], catch_exceptions=False)
    assert done.exit_code == 1, done.output
    assert (f"{root / 'seeds' / 'p.csv'}:3: seed of model `s.p`: column `amount` is INT, and the value 'x1' "
            "does not fit it; nothing was loaded") in done.output
    context = Context(root)
    assert context.state.get_environment("prod") is None and context.environment_names() == []


@pytest.mark.parametrize("csv, line, message", [
    ("id,amount,name\n1,10,a\n2,20,b,extra\n", 3, "this record has 4 fields, the header 3 (id, amount, name)"),
    ("id,amount,name\n1,10,\"two\nlines\"\n\n2,2.5,b\n", 5, "column `amount` is INT, and the value '2.5'"),
    ("id,amount,name\n1,2147483648,a\n", 2, "column `amount` is INT, and the value '2147483648'"),
])
def test_what_a_record_holds_is_checked_against_the_header_and_the_types(tmp_path, csv, line, message):
    root = _project(tmp_path, csv)
    with pytest.raises(ConfigError) as info:
        Context(root).plan("prod")
    assert str(info.value).startswith(f"{root / 'seeds' / 'p.csv'}:{line}: seed of model `s.p`: {message}")


@pytest.mark.parametrize("amount, value", [("DECIMAL(4, 2)", "123.4"), ("BOOLEAN", "maybe"), ("BIGINT", "1_000"),
                                           ("DOUBLE", "1,5"), ("BIGINT", "9223372036854775808")])
def test_numbers_and_booleans_that_spark_cannot_cast_are_refused(tmp_path, amount, value):
    root = _project(tmp_path, f'id,amount,name\n1,"{value}",a\n', amount=amount)
    with pytest.raises(ConfigError, match=rf"p\.csv:2: .*column `amount` is {amount.split('(')[0]}.*{value!r}"):
        Context(root).plan("prod")


def test_a_declared_column_the_header_lacks_names_the_model_file(tmp_path):
    root = _project(tmp_path, "id,amount,title\n1,10,a\n")
    with pytest.raises(ConfigError) as info:
        Context(root).plan("prod")
    assert str(info.value) == (f"{root / 'models' / 'p.sql'}:1: model `s.p` declares column `name`, which the "
                               f"header of its seed {root / 'seeds' / 'p.csv'} lacks (its columns: id, amount, title)")


@pytest.mark.parametrize("amount, values", [
    ("INT", [" 12 ", "1e1", "2.0", "-7", "", "NA"]),
    ("DECIMAL(4, 2)", ["12.345", "-99.99", "1e1"]),
    ("BOOLEAN", ["true", "F", "yes", " 0 "]),
    ("DOUBLE", ["1.5", "-1e-3", "NaN", "inf", ".5"]),
])
def test_what_sqlmesh_reads_into_the_column_plans(tmp_path, amount, values):
    rows = "".join(f'{i},"{v}",n{i}\n' for i, v in enumerate(values))
    root = _project(tmp_path, "ID,Amount,name,extra\n" + rows.replace("\n", ",x\n") + "99\n", amount=amount)
    assert "s.p" in Context(root).plan("prod").snapshots


def test_lines_of_spaces_only_are_skipped_as_pandas_and_sqlmesh_skip_them(tmp_path):
    """A CSV ending in a line of spaces (or holding one between records): SQLMesh's pandas reads it as blank."""
    root = _project(tmp_path, "id,amount,name\n1,10,a\n   \n2,20,b\n  \t \n")
    assert "s.p" in Context(root).plan("prod").snapshots


def test_a_header_with_spaces_after_its_commas_names_the_declared_columns(tmp_path):
    """`id, amount, name` (afzaljasani/sqlmesh_demo_example's seed): SQLMesh reads each header name as an
    identifier, so ` amount` is `amount`, and loaded the project's 4 rows."""
    root = _project(tmp_path, "id, amount, name\n1,10, a\n2,20, b\n")
    assert "s.p" in Context(root).plan("prod").snapshots
