"""Credentials never reach an error, a terminal or a log: tokens, passwords, env_var values, state details."""

from __future__ import annotations

import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from bot.cli import cli
from bot.errors import BotError, ConfigError, CycleError, StateError
from bot.project.config import StateConnection, load_config
from bot.redact import mask_url, on_register, redact, register, register_url, url_credentials
from bot.spark.connect import check_reachable
from bot.state.connect import connect_state
from conftest import POSTGRES
from spark_servers import free_port


def unique(prefix: str) -> str:
    """A value no other test registers (the registry lives as long as the process)."""
    return f"{prefix}{secrets.token_hex(4)}"


def assert_hidden(text: str, *values: str) -> None:
    for value in values:
        for form in (value, value.lower(), value.upper()):
            assert form not in text, f"{form!r} shown in: {text}"


def invoke(root: Path, *args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(cli, ["-p", str(root), *args], env=env, catch_exceptions=False)


def write_config(root: Path, text: str) -> Path:
    (root / "models").mkdir(parents=True)
    (root / "config.yaml").write_text(text + "model_defaults:\n  dialect: spark\n")
    return root


STATE_CONFIG = f"""
gateways:
  ci:
    state_connection:
      type: postgres
      host: {POSTGRES['host']}
      port: {POSTGRES['port']}
      user: {POSTGRES['user']}
      database: "{{{{ env_var('MESHBOT_STATE_DATABASE') }}}}"
      password: "{{{{ env_var('MESHBOT_STATE_PASSWORD') }}}}"
"""


def test_redact_masks_every_case_longest_first_and_skips_short_values():
    token, inner = unique("Tok-"), unique("In")
    register(token)
    register(f"{inner}{token}")     # contains the first: masked whole, not as `In...***`
    register("ab")                  # too short to register
    register("")
    text = f"a {token.lower()} b {token.upper()} c {inner}{token} d ab"
    assert redact(text) == "a *** b *** c *** d ab"
    lines = unique("line-one-") + "\n" + unique("line-two-")
    register(lines)
    assert redact(f"got {lines.splitlines()[1]} and {lines!r}") == "got *** and '***'"


def test_bot_errors_are_redacted_wherever_their_text_is_built():
    secret = unique("Pa55-")
    register(secret)
    error = ConfigError(f"`kind` must be one of a, b (got {secret.lower()})", path="config.yaml", line=3)
    assert str(error) == "config.yaml:3: `kind` must be one of a, b (got ***)"
    assert str(StateError(f"state {secret.upper()} failed")) == "state *** failed"
    assert str(CycleError(["a", secret])) == "models depend on each other in a cycle: a -> *** -> a"
    assert isinstance(error, BotError)


def test_credentials_found_in_connection_urls():
    assert url_credentials("sc://spark:443/;use_ssl=true;token=SECRETTOKEN123;user_id=me") == ("SECRETTOKEN123",)
    assert url_credentials("postgresql://bot:p%40ss@db:5432/meta?sslmode=require&sslpassword=kpw1") == (
        "p%40ss", "p@ss", "kpw1")
    assert url_credentials("jdbc:mysql://db/hms?user=hive&password=Hive-Pw1") == ("Hive-Pw1",)
    assert url_credentials("spark://master:7077") == ()
    assert mask_url("sc://spark:443/;use_ssl=true;token=SECRETTOKEN123") == "sc://spark:443/;use_ssl=true;token=***"
    assert mask_url("postgresql://bot:pw@db/m?password=x") == "postgresql://bot:***@db/m?password=***"
    secret = unique("Sec-")
    register_url(f"https://user:{secret}@host/x")
    assert redact(f"failed: {secret.lower()}") == "failed: ***"


def test_unreachable_spark_connect_error_hides_the_token(tmp_path):
    token = unique("SECRETTOKEN")
    port = free_port()
    url = f"sc://127.0.0.1:{port}/;use_ssl=true;token={token}"
    with pytest.raises(BotError) as error:
        check_reachable(url)
    message = str(error.value)
    assert f"could not reach Spark Connect at sc://127.0.0.1:{port}/;use_ssl=true;token=*** " in message
    assert_hidden(message, token)

    # The same through the CLI, with the URL written in config.yaml (a process of its own: this one
    # may hold a Spark session already).
    root = write_config(tmp_path / "p", f"gateways:\n  remote:\n    connection:\n      remote: {url}\n")
    result = subprocess.run([sys.executable, "-m", "bot", "-p", str(root), "fetchdf", "SELECT 1"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "could not reach Spark Connect at sc://127.0.0.1" in result.stderr and "token=***" in result.stderr
    assert_hidden(result.stdout + result.stderr, token)


def test_state_connection_error_names_the_key_not_host_user_database_or_password():
    database, password = unique("NoSuchDb"), unique("Pw-")
    connection = StateConnection(type="postgres", host=POSTGRES["host"], port=POSTGRES["port"],
                                 user=POSTGRES["user"], password=password, database=database,
                                 config_key="gateways.ci.state_connection")
    with pytest.raises(StateError) as error:
        connect_state(connection, project_root=Path("."))
    message = str(error.value)
    assert message == ("cannot reach the state database `gateways.ci.state_connection`: "
                       "the database does not exist (check `database`)")
    assert_hidden(message, database, password, POSTGRES["host"])

    closed = StateConnection(type="postgres", host=POSTGRES["host"], port=free_port(), user="meshbot_user",
                             database=database)
    with pytest.raises(StateError) as error:
        connect_state(closed, project_root=Path("."))
    message = str(error.value)
    assert message.startswith("cannot reach the state database `state_connection`: connection refused "
                              "(check `host` and `port`"), message
    assert_hidden(message, database, POSTGRES["host"], "meshbot_user")


def test_cli_state_error_shows_no_env_var_value_and_masks_them_on_github_actions(tmp_path):
    database, password = unique("MissingDb"), unique("State-Pw-")
    root = write_config(tmp_path / "p", STATE_CONFIG)
    env = {"MESHBOT_STATE_DATABASE": database, "MESHBOT_STATE_PASSWORD": password}
    try:
        result = invoke(root, "info", env=env)
        assert result.exit_code == 1, result.output
        assert ("Error: cannot reach the state database `gateways.ci.state_connection`: the database does "
                "not exist (check `database`)") in result.output
        assert_hidden(result.output, database, password, f"{POSTGRES['user']}@")
        assert "::add-mask::" not in result.output

        masked = invoke(root, "info", env={**env, "GITHUB_ACTIONS": "true"})
        for value in (database, password):
            for form in (value, value.lower(), value.upper()):
                assert f"::add-mask::{form}\n" in masked.stderr, masked.stderr
        assert "::add-mask::" not in masked.stdout
    finally:
        on_register(None)


def test_env_var_value_echoed_lowercased_in_a_config_error_is_masked(tmp_path):
    kind = unique("MySecretKind")
    root = write_config(tmp_path / "p", "gateways:\n  g:\n    connection:\n"
                                        "      type: \"{{ env_var('MESHBOT_CONNECTION_TYPE') }}\"\n")
    with pytest.raises(ConfigError) as error:
        load_config(root, environ={"MESHBOT_CONNECTION_TYPE": kind}).gateway()
    assert "`gateways.g.connection`: connection type `***` is not supported (only `spark`)" in str(error.value)
    result = invoke(root, "info", env={"MESHBOT_CONNECTION_TYPE": kind})
    assert result.exit_code == 1 and "config.yaml: `gateways.g.connection`" in result.output, result.output
    assert_hidden(result.output, kind)


def test_unexpected_exception_in_a_command_is_printed_redacted(tmp_path, monkeypatch):
    from bot.state.store import SqlStateSync

    token = unique("Leaky-Token-")
    register(token)

    def broken(self):
        raise RuntimeError(f"driver said: bad token {token.lower()}")

    monkeypatch.setattr(SqlStateSync, "get_environments", broken)
    root = write_config(tmp_path / "p", "")
    result = invoke(root, "environments")
    assert result.exit_code == 1
    assert "Traceback" in result.output and "RuntimeError: driver said: bad token ***" in result.output
    assert_hidden(result.output, token)


def test_a_secret_is_masked_before_it_is_escaped_for_markdown_and_the_job_summary(tmp_path, monkeypatch):
    """A secret holding Markdown's special characters no longer equals itself once escaped: every value a
    template shows (a data-diff row, a profile's min), and every text of the job summary, is redacted first."""
    from bot.github.local import StepOutputs
    from bot.report.markdown import render

    secret = unique("s3cr_*t<") + "&pw"
    register(secret)
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "probe.md.j2").write_text("| {{ view.value }} | {{ view.other }} |\n")
    monkeypatch.setenv("MESHBOT_TEMPLATES_DIR", str(tmp_path / "templates"))
    shown = str(render("probe.md.j2", {"value": f"row {secret}", "other": "plain_value"}))
    assert shown == "| row \\*\\*\\* | plain\\_value |\n"   # GitHub shows `| row *** | plain_value |`
    outputs = StepOutputs.in_folder(tmp_path / "out")
    outputs.summary(f"rows: {secret}")
    assert outputs.summary_file.read_text() == "rows: \\*\\*\\*\n"


def test_a_url_password_is_found_up_to_the_urls_last_at_sign():
    assert url_credentials("postgresql://bot:pa/ss?x#1@db/m") == ("pa/ss?x#1",)
    assert url_credentials("postgresql://bot:p@ss@db/m") == ("p@ss",)
    assert url_credentials("https://hooks.example.com/x?Authorization=Bearer-abc1") == ("Bearer-abc1",)
    assert mask_url("postgresql://bot:pa/ss@db/m") == "postgresql://bot:***@db/m"
