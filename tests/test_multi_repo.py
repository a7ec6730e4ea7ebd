"""Multi-repo projects (SQLMesh's `sqlmesh -p repo_1 -p repo_2 plan`): each repository keeps its own config,
macros, variables, tests and linter rules, and they share one DAG and one state. A plan of one repository
keeps the others' models of prod (from the state) and reaches their children. Expected rows and categories
are what SQLMesh 0.236.4 gave for the same two repositories on DuckDB."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from bot.cli import cli
from bot.context import Context
from bot.errors import ConfigError
from bot.plan.definition import ChangeType, PlanOptions
from bot.snapshot import ChangeCategory
from project_files import write_files


def _config(project: str, fee: int, *, linter: str = "") -> str:
    return f"""project: {project}
gateways:
  local:
    connection: {{type: spark, master: 'local[1]'}}
default_gateway: local
model_defaults:
  dialect: duckdb
variables:
  fee: {fee}
{linter}"""


def _bump(by: int) -> str:
    return f"from sqlmesh import macro\n\n\n@macro()\ndef bump(evaluator, x):\n    return f\"{{x}} + {by}\"\n"


REPO_1 = {
    "config.yaml": _config("repo_1", 10),
    "macros/m.py": _bump(1),
    "models/a.sql": "MODEL (name bronze.a, kind FULL);\nSELECT 1 AS col_a, 'b' AS col_b, @bump(1) AS bumped, @fee AS fee\n",
    "models/b.sql": "MODEL (name bronze.b, kind FULL);\nSELECT * FROM bronze.a\n",
}
REPO_2 = {
    "config.yaml": _config("repo_2", 20, linter="linter:\n  enabled: true\n  rules: [noselectstar]\n"),
    "macros/m.py": _bump(100),
    "models/c.sql": ("MODEL (name silver.c, kind FULL, audits (not_null(columns := (col_a))));\n"
                     "SELECT DISTINCT col_a, @bump(col_a) AS bumped2, @fee AS fee2 FROM bronze.a\n"),
    "tests/test_c.yaml": """test_c:
  model: silver.c
  inputs:
    bronze.a:
      - col_a: 5
  outputs:
    query:
      - col_a: 5
        bumped2: 105
        fee2: 20
""",
}


@pytest.fixture
def repos(tmp_path):
    return write_files(tmp_path / "repo_1", REPO_1), write_files(tmp_path / "repo_2", REPO_2)


def test_each_repository_renders_with_its_own_macros_and_variables_in_one_dag(repos):
    context = Context(list(repos))
    rendered = context.rendered_queries()
    assert list(context.models) == ["bronze.a", "bronze.b", "silver.c"]
    assert "1 + 1 AS `bumped`, 10 AS `fee`" in rendered["bronze.a"]
    assert "`col_a` + 100 AS `bumped2`, 20 AS `fee2`" in rendered["silver.c"]
    assert [(r.name, r.models) for r in context.project.repositories] == [
        ("repo_1", ("bronze.a", "bronze.b")), ("repo_2", ("silver.c",))]
    # repo_2's linter rule holds for repo_2's models only: bronze.b's SELECT * is repo_1's business
    assert [(v.rule, v.model) for v in context.lint().violations] == []
    (repos[1] / "models" / "d.sql").write_text("MODEL (name silver.d, kind FULL);\nSELECT * FROM bronze.b\n")
    assert [(v.rule, v.model) for v in Context(list(repos)).lint().violations] == [("noselectstar", "silver.d")]


def test_the_cli_takes_p_once_per_repository(repos):
    result = CliRunner().invoke(cli, ["-p", str(repos[0]), "-p", str(repos[1]), "plan", "--explain"])
    assert result.exit_code == 0, result.output
    assert "bronze.a" in result.output and "silver.c" in result.output
    info = CliRunner().invoke(cli, ["-p", str(repos[0]), "-p", str(repos[1]), "info"])
    assert f"Project: {repos[0]}, {repos[1]}" in info.output
    assert (repos[0] / ".meshbot" / "state.db").is_file() and not (repos[1] / ".meshbot" / "state.db").exists()


def test_a_model_in_two_repositories_or_a_repository_given_twice_is_refused(repos, tmp_path):
    (repos[1] / "models" / "dup.sql").write_text("MODEL (name bronze.b, kind FULL);\nSELECT 1 AS x\n")
    with pytest.raises(ConfigError, match="model `bronze.b` is defined in two repositories") as error:
        Context(list(repos)).load()
    assert str(repos[0] / "models" / "b.sql") in str(error.value) and "dup.sql" in str(error.value)
    with pytest.raises(ConfigError, match="one repository inside another"):
        Context([repos[0], repos[0]]).load()
    twin = write_files(tmp_path / "twin", {"config.yaml": _config("repo_1", 1)})
    with pytest.raises(ConfigError, match="both named `repo_1`"):
        Context([repos[0], twin]).load()


@pytest.mark.spark
def test_plans_of_both_and_of_one_repository_share_prod_as_sqlmesh_does(repos, clean_catalog):
    both = Context(list(repos))
    try:
        both.apply(both.plan("prod"))
        assert both.fetchdf("SELECT * FROM silver.c") == [{"col_a": 1, "bumped2": 101, "fee2": 20}]
        assert both.fetchdf("SELECT * FROM bronze.b") == [{"col_a": 1, "col_b": "b", "bumped": 2, "fee": 10}]
        tests = both.test()
        assert [(t.name, t.passed) for t in tests.results] == [("test_c", True)]
    finally:
        both.close()

    a_sql = repos[0] / "models" / "a.sql"
    a_sql.write_text(a_sql.read_text().replace("'b' AS col_b", "'b' AS col_b, 'c' AS col_c"))
    one = Context(repos[0])
    try:
        plan = one.plan("prod")
        assert all(c.change is not ChangeType.REMOVED for c in plan.changes), "repo_2's models stay in prod"
        categories = {c.name: c.category for c in plan.changes}
        assert categories == {"bronze.a": ChangeCategory.NON_BREAKING, "bronze.b": ChangeCategory.NON_BREAKING,
                              "silver.c": ChangeCategory.INDIRECT_NON_BREAKING}
        one.apply(plan)
        a_sql.write_text(a_sql.read_text().replace("SELECT 1 AS col_a", "SELECT 1 + 1 AS col_a"))
    finally:
        one.close()
    again = Context(repos[0])
    try:
        plan = again.plan("prod", options=PlanOptions())
        assert {c.name: c.category for c in plan.changes}["silver.c"] is ChangeCategory.INDIRECT_BREAKING
        again.apply(plan)
        # silver.c was rebuilt from its snapshot's definition: repo_2's macro and variable, as in SQLMesh
        assert again.fetchdf("SELECT * FROM silver.c") == [{"col_a": 2, "bumped2": 102, "fee2": 20}]
        assert again.fetchdf("SELECT * FROM bronze.b") == [
            {"col_a": 2, "col_b": "b", "col_c": "c", "bumped": 2, "fee": 10}]
    finally:
        again.close()


def test_the_action_plans_every_repository_in_one_comment_and_runs_when_any_of_them_changes(tmp_path):
    """`project_path` with several folders (the CLI's --project-path once per folder): one prod plan preview
    over both repositories' models; a PR touching only repo_2 is the project's, one touching neither is not."""
    import responses

    from bot.github.action import Invocation, main
    from github_support import API_ENV, FakeRepository, install, payload, write_event

    workspace = tmp_path / "ws"
    repos = write_files(workspace / "repo_1", REPO_1), write_files(workspace / "repo_2", REPO_2)

    def preview(changed: list[str]) -> str:
        with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
            gh = install(rsps)
            repo = FakeRepository(gh, files=changed)
            code = main(Invocation(command="gen-prod-plan", event_name="pull_request", project_path=str(repos[0]),
                                   other_paths=(str(repos[1]),), config="allow_ephemeral_state: true",
                                   event_path=write_event(tmp_path, payload("pull_request/opened.payload.json"))),
                        env={**API_ENV, "GITHUB_WORKSPACE": str(workspace)}, out=lambda line: None)
            assert not gh.errors, gh.errors
        assert code == 0
        return next(c["body"] for c in repo.comments if "<!-- meshbot:pr-comment" in c["body"])

    body = preview(["repo_2/models/c.sql"])
    assert all(name in body for name in ("bronze.a", "bronze.b", "silver.c")), body
    assert "no project file" not in body.lower()
    assert "bronze.a" not in preview(["docs/readme.md"])


def test_an_unknown_macro_of_a_model_held_from_an_unloaded_repository_says_to_load_it(tmp_path):
    """A plan of repo_1 alone keeps repo_2's models of prod; one that renders again (a parent changed) calls
    repo_2's macros, which are not loaded: the error says which repository to add with -p."""
    from dataclasses import replace

    from bot.project.loader import load_project
    from bot.project.render import render_query

    root = write_files(tmp_path / "repo_2", REPO_2)
    model = load_project(root, use_cache=False).models["silver.c"]
    held = replace(model, unloaded_from="repo_2", path=tmp_path / "elsewhere" / "models" / "c.sql")
    with pytest.raises(ConfigError) as raised:
        render_query(held, variables={"fee": 20})
    assert "unknown macro @BUMP in model silver.c: the model is prod's, held from repository `repo_2`, which this " \
           "plan did not load" in str(raised.value)
    assert "load it too (`-p <folder of repo_2>` beside this repository's -p)" in str(raised.value)
    with pytest.raises(ConfigError, match=r"unknown macro @BUMP in model silver.c$"):
        render_query(replace(held, unloaded_from=""), variables={"fee": 20})
