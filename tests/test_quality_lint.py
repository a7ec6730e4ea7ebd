"""`meshbot lint` and the linter before `plan`: the expected violations are those SQLMesh 0.236.4's own
`sqlmesh lint` reports on the same projects (run on its DuckDB engine; model names as written)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.cli.app import cli
from bot.context import Context
from bot.errors import ConfigError

AUDITED = "audits (not_null(columns := (id)))"

# one model per rule; SQLMesh 0.236.4 with `rules: ALL` reports exactly EVERY_RULE on them
MODELS = {
    "a": "MODEL (\n  name s.a,\n  kind FULL\n);\n\nSELECT 1 AS id, 'x' AS name\n",
    "b": f"MODEL (name s.b, kind FULL, {AUDITED});\nSELECT * FROM s.a\n",
    "c": f"MODEL (name s.c, kind FULL, {AUDITED});\nSELECT * FROM ext.t\n",
    "d": f"MODEL (name s.d, kind FULL, {AUDITED});\nSELECT id, nonexistent FROM s.a\n",
    "e": f"MODEL (name s.e, kind FULL, {AUDITED});\nSELECT id, id, 1 + 1 FROM s.a\n",
    "f": f"MODEL (name s.f, kind VIEW, {AUDITED}, ignored_rules (nomissingunittest));\nSELECT id FROM s.a\n",
}
EVERY_RULE = {
    ("models/a.sql", 1, "nomissingaudits"), ("models/a.sql", 1, "nomissingunittest"),
    ("models/b.sql", 1, "nomissingunittest"), ("models/b.sql", 2, "noselectstar"),
    ("models/c.sql", 1, "nomissingunittest"), ("models/c.sql", 2, "invalidselectstarexpansion"),
    ("models/c.sql", 2, "nomissingexternalmodels"), ("models/c.sql", 2, "noselectstar"),
    ("models/d.sql", 1, "nomissingunittest"), ("models/d.sql", 2, "ambiguousorinvalidcolumn"),
    ("models/e.sql", 1, "nomissingunittest"), ("models/e.sql", 2, "noambiguousprojections"),
}
TEST_OF_A = "test_a:\n  model: s.a\n  outputs:\n    query:\n      - id: 1\n        name: x\n"


def _project(root: Path, linter: str, models: dict[str, str] = MODELS, *, tests: str | None = None) -> Path:
    (root / "models").mkdir(parents=True)
    (root / "config.yaml").write_text(f"model_defaults:\n  dialect: duckdb\n  start: '2024-01-01'\n{linter}")
    for name, text in models.items():
        (root / "models" / f"{name}.sql").write_text(text)
    if tests:
        (root / "tests").mkdir()
        (root / "tests" / "test_a.yaml").write_text(tests)
    return root


def _found(root: Path) -> set[tuple[str, int, str, str]]:
    result = Context(root).lint()
    return {(str(v.path.relative_to(root)), v.line, v.rule, v.level) for v in result.violations}


def _lint(root: Path, *args: str):
    return CliRunner().invoke(cli, ["-p", str(root), *args], catch_exceptions=False)


def test_every_builtin_rule_reports_what_sqlmesh_reports(tmp_path):
    root = _project(tmp_path / "p", "linter:\n  enabled: true\n  rules: ALL\n")
    assert _found(root) == {(*v, "error") for v in EVERY_RULE}


def test_messages_name_the_model_and_the_missing_parts(tmp_path):
    root = _project(tmp_path / "p", "linter:\n  enabled: true\n  rules: ALL\n")
    messages = {(v.model, v.rule): v.message for v in Context(root).lint().violations}
    assert "Column 'nonexistent' could not be resolved" in messages[("s.d", "ambiguousorinvalidcolumn")]
    assert "'ext.t'" in messages[("s.c", "nomissingexternalmodels")]
    assert "'ext.t'" in messages[("s.c", "invalidselectstarexpansion")]
    assert messages[("s.e", "noambiguousprojections")] == "Found duplicate outer select name 'id'"


def test_cli_lists_file_line_level_rule_and_model_and_exits_1_on_errors(tmp_path):
    root = _project(tmp_path / "p", "linter:\n  enabled: true\n  rules: ALL\n")
    result = _lint(root, "lint")
    assert result.exit_code == 1
    assert "models/b.sql:2: error [noselectstar] model s.b: Query should not contain SELECT *" in result.output
    assert "12 error(s), 0 warning(s)" in result.output


# SQLMesh 0.236.4 on this project: warnings only (b: noselectstar, nomissingunittest; a: nomissingaudits),
# exit 0; a duplicate `id` in s.a then adds the one error noambiguousprojections and exit 1
LEVELS = ("linter:\n  enabled: true\n  rules: [noambiguousprojections]\n"
          "  warn_rules: [nomissingaudits, nomissingunittest, noselectstar]\n")
LEVEL_MODELS = {"a": "MODEL (name s.a, kind FULL);\nSELECT 1 AS id, 'x' AS name\n",
                "b": "MODEL (name s.b, kind FULL, ignored_rules (nomissingaudits));\nSELECT * FROM s.a\n"}


def test_warn_rules_model_ignored_rules_and_unit_tests(tmp_path):
    root = _project(tmp_path / "p", LEVELS, LEVEL_MODELS, tests=TEST_OF_A)
    assert _found(root) == {("models/a.sql", 1, "nomissingaudits", "warning"),
                            ("models/b.sql", 1, "nomissingunittest", "warning"),
                            ("models/b.sql", 2, "noselectstar", "warning")}
    assert _lint(root, "lint").exit_code == 0
    (root / "models" / "a.sql").write_text("MODEL (name s.a, kind FULL);\nSELECT 1 AS id, 2 AS id, 'x' AS name\n")
    result = _lint(root, "lint")
    assert result.exit_code == 1
    assert "models/a.sql:2: error [noambiguousprojections] model s.a" in result.output
    assert "1 error(s), 3 warning(s)" in result.output


def test_ignored_rules_in_config_drop_rules_from_all(tmp_path):
    root = _project(tmp_path / "p", "linter:\n  enabled: true\n  rules: ALL\n"
                                    "  ignored_rules: [nomissingunittest, noselectstar]\n")
    expected = {(*v, "error") for v in EVERY_RULE if v[2] not in ("nomissingunittest", "noselectstar")}
    assert _found(root) == expected


@pytest.mark.parametrize("linter, words", [
    ("linter:\n  rules: [nosuchrule]\n", ["`nosuchrule`", "linter.rules", "could not be found"]),
    ("linter:\n  rules: [noselectstar]\n  warn_rules: [noselectstar]\n", ["noselectstar", "both warn and raise"]),
])
def test_bad_rule_config_is_an_error_naming_config_yaml(tmp_path, linter, words):
    root = _project(tmp_path / "p", linter)
    with pytest.raises(ConfigError) as failure:
        Context(root).lint()
    assert str(failure.value).startswith(str(root / "config.yaml"))
    assert all(word in str(failure.value) for word in words)


def test_unknown_rule_in_a_model_names_the_model_file_and_line(tmp_path):
    models = {"a": "MODEL (\n  name s.a,\n  ignored_rules (nope)\n);\nSELECT 1 AS id\n"}
    root = _project(tmp_path / "p", "linter:\n  enabled: true\n  rules: ALL\n", models)
    result = _lint(root, "lint")
    assert result.exit_code == 1
    assert f"{root / 'models' / 'a.sql'}:3: linter rule `nope`" in result.output


CUSTOM_RULES = """from __future__ import annotations

import typing as t

from sqlmesh.core.linter.rule import Rule, RuleViolation
from sqlmesh.core.model import Model


class NoMissingOwner(Rule):
    \"\"\"Model owner should always be specified.\"\"\"

    def check_model(self, model: Model) -> t.Optional[RuleViolation]:
        return self.violation() if not model.owner else None


class NoLimitInQuery(Rule):
    def check_model(self, model: Model) -> t.Optional[RuleViolation]:
        query = model.render_query()
        if query is not None and query.args.get("limit"):
            return self.violation(f"Model {model.name} has a LIMIT")
        return None
"""


def test_custom_rules_from_the_linter_folder_run_like_sqlmesh(tmp_path):
    # SQLMesh 0.236.4 on this project: a: nolimitinquery (error); b: nomissingowner (error), noselectstar (warning)
    models = {"a": "MODEL (name s.a, kind FULL, owner jen);\nSELECT 1 AS id, 'x' AS name LIMIT 5\n",
              "b": LEVEL_MODELS["b"]}
    root = _project(tmp_path / "p", "linter:\n  enabled: true\n  rules: [nomissingowner, nolimitinquery]\n"
                                    "  warn_rules: [noselectstar]\n", models)
    (root / "linter").mkdir()
    (root / "linter" / "user.py").write_text(CUSTOM_RULES)
    assert _found(root) == {("models/a.sql", 1, "nolimitinquery", "error"),
                            ("models/b.sql", 1, "nomissingowner", "error"),
                            ("models/b.sql", 2, "noselectstar", "warning")}
    result = _lint(root, "lint")
    assert result.exit_code == 1
    assert "models/a.sql:1: error [nolimitinquery] model s.a: Model s.a has a LIMIT" in result.output
    assert "models/b.sql:1: error [nomissingowner] model s.b: Model owner should always be specified." in result.output


def test_a_custom_rule_file_that_fails_to_import_is_named(tmp_path):
    root = _project(tmp_path / "p", "linter:\n  enabled: true\n  rules: [noselectstar]\n", LEVEL_MODELS)
    (root / "linter").mkdir()
    (root / "linter" / "broken.py").write_text("from sqlmesh.core.linter.nothing import Rule\n")
    result = _lint(root, "lint")
    assert result.exit_code == 1
    assert f"{root / 'linter' / 'broken.py'}: cannot load custom linter rules" in result.output


def test_plan_stops_on_lint_errors_when_enabled_and_changes_nothing(tmp_path):
    root = _project(tmp_path / "p", "linter:\n  enabled: true\n  rules: [noselectstar]\n", LEVEL_MODELS)
    result = _lint(root, "plan", "--auto-apply")
    assert result.exit_code == 1
    assert "models/b.sql:2: error [noselectstar]" in result.output
    assert "linter found 1 error(s)" in result.output
    assert Context(root).state.get_environment("prod") is None


def test_plan_ignores_the_linter_when_not_enabled(tmp_path):
    root = _project(tmp_path / "p", "linter:\n  enabled: false\n  rules: [noselectstar]\n", LEVEL_MODELS)
    result = _lint(root, "plan", "--explain")
    assert result.exit_code == 0, result.output
    assert "noselectstar" not in result.output


COLUMN_RULES = ("linter:\n  enabled: true\n  rules: [ambiguousorinvalidcolumn, invalidselectstarexpansion, "
                "noambiguousprojections, nomissingexternalmodels, noselectstar]\n")
COLUMN_MODELS = {
    "seed": "MODEL (name s.seed, kind SEED (path '../seeds/s.csv'));\n",
    "k1": "MODEL (name s.k1, kind FULL);\nSELECT nope FROM s.seed\n",
    "k2": "MODEL (name s.k2, kind FULL);\nSELECT id FROM s.seed AS a JOIN raw.events AS b ON a.id = b.id\n",
    "k3": "MODEL (name s.k3, kind FULL);\nWITH c AS (SELECT * FROM raw.events) SELECT c.id, c.missing FROM c\n",
    "k4": "MODEL (name s.k4, kind FULL);\nSELECT e.bad FROM raw.events AS e\n",
    "k5": "MODEL (name s.k5, kind FULL);\nSELECT *, 1 AS x FROM raw.nocols\n",
    "k6": "MODEL (name s.k6, kind FULL);\nSELECT x FROM s.k5\n",
    "k7": "MODEL (name s.k7, kind FULL);\nSELECT a.*, b.ts FROM s.seed AS a, raw.events AS b\n",
    "k8": "MODEL (name s.k8, kind FULL);\nSELECT id, name, ts FROM s.k7 WHERE ds > 1\n",
    "k9": "MODEL (name s.k9, kind FULL);\nSELECT upper(name), count(*) FROM s.seed GROUP BY 1\n",
}


def test_columns_come_from_seeds_external_models_joins_and_ctes_as_in_sqlmesh(tmp_path):
    root = _project(tmp_path / "p", COLUMN_RULES, COLUMN_MODELS)
    (root / "seeds").mkdir()
    (root / "seeds" / "s.csv").write_text("id,name\n1,a\n2,b\n")
    (root / "external_models.yaml").write_text(
        "- name: raw.events\n  columns:\n    id: int\n    ts: timestamp\n- name: raw.nocols\n")
    assert _found(root) == {
        ("models/k1.sql", 2, "ambiguousorinvalidcolumn", "error"),
        ("models/k2.sql", 2, "ambiguousorinvalidcolumn", "error"),
        ("models/k3.sql", 2, "ambiguousorinvalidcolumn", "error"),
        ("models/k4.sql", 2, "ambiguousorinvalidcolumn", "error"),
        ("models/k5.sql", 2, "invalidselectstarexpansion", "error"),
        ("models/k5.sql", 2, "noselectstar", "error"),
        ("models/k7.sql", 2, "noselectstar", "error"),
        ("models/k8.sql", 2, "ambiguousorinvalidcolumn", "error"),
    }


def test_plan_prints_lint_warnings_and_goes_on(tmp_path):
    root = _project(tmp_path / "p", "linter:\n  enabled: true\n  warn_rules: [noselectstar]\n", LEVEL_MODELS)
    result = _lint(root, "plan", "--explain")
    assert result.exit_code == 0, result.output
    assert "Warning: models/b.sql:2: warning [noselectstar] model s.b" in result.output


def test_a_disabled_linter_checks_nothing_but_its_rule_names(tmp_path):
    # SQLMesh 0.236.4: `sqlmesh lint` with `enabled: false` prints nothing and exits 0
    duplicate = {**LEVEL_MODELS, "a": "MODEL (name s.a, kind FULL);\nSELECT 1 AS id, 2 AS id\n"}
    root = _project(tmp_path / "p", LEVELS.replace("enabled: true", "enabled: false"), duplicate)
    result = _lint(root, "lint")
    assert result.exit_code == 0
    assert "The linter is off" in result.output and "noselectstar" not in result.output


def test_linter_and_format_settings_from_a_config_py(tmp_path):
    root = _project(tmp_path / "p", "", LEVEL_MODELS)
    (root / "config.yaml").unlink()
    (root / "config.py").write_text(
        "from sqlmesh.core.config import Config, FormatConfig, LinterConfig, ModelDefaultsConfig\n\n"
        "config = Config(model_defaults=ModelDefaultsConfig(dialect='duckdb', start='2024-01-01'),\n"
        "                linter=LinterConfig(enabled=True, rules=['noselectstar'], warn_rules={'nomissingaudits'}),\n"
        "                format=FormatConfig(append_newline=True))\n")
    assert _found(root) == {("models/a.sql", 1, "nomissingaudits", "warning"),
                            ("models/b.sql", 2, "noselectstar", "error")}
    assert _lint(root, "format").exit_code == 0
    assert (root / "models" / "b.sql").read_text().endswith("FROM s.a\n")


def test_lines_point_into_multi_line_queries(tmp_path):
    models = {"a": "MODEL (name s.a, kind FULL, audits (not_null(columns := (id))));\n\nSELECT 1 AS id\n",
              "b": "MODEL (\n  name s.b,\n  kind FULL\n);\n\nSELECT\n  id,\n  *\nFROM s.a\nJOIN raw.t\n  ON TRUE\n"}
    root = _project(tmp_path / "p", "linter:\n  enabled: true\n  rules: [noselectstar, nomissingexternalmodels]\n",
                    models)
    assert _found(root) == {("models/b.sql", 8, "noselectstar", "error"),
                            ("models/b.sql", 10, "nomissingexternalmodels", "error")}
