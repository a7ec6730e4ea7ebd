"""config.yaml parsing: gateways, defaults, env_var substitution, and the errors users see."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.errors import ConfigError
from bot.project.config import load_config

FULL = """
gateways:
  dev:
    connection:
      type: spark
      master: spark://cluster:7077
      config:
        spark.sql.shuffle.partitions: 4
        spark.sql.adaptive.enabled: true
      catalog: spark_catalog
    state_connection:
      type: postgres
      host: db.internal
      port: 6543
      database: meshbot
      user: bot
      password: "{{ env_var('PG_PASSWORD') }}"
    test_connection:
      type: spark
      master: local[1]
  connect:
    connection:
      type: spark
      remote: sc://spark:15002
default_gateway: connect
model_defaults:
  dialect: DuckDB
  kind: full
  cron: '@hourly'
  start: '2024-01-01'
  owner: data
variables:
  country: "{{ env_var('COUNTRY', 'DE') }}"
  limit: 10
snapshot_ttl: in 2 weeks
physical_schema_mapping:
  '^shop$': shop_physical
plan:
  auto_categorize_changes:
    sql: semi
  include_unmodified: true
cicd_bot:
  type: github
  merge_method: squash
users:
  - username: alice
    github_username: alice-gh
    roles: [required_approver]
"""


def write(tmp_path: Path, text: str, name: str = "config.yaml") -> Path:
    (tmp_path / name).write_text(text)
    return tmp_path


def test_full_config_is_parsed(tmp_path):
    config = load_config(write(tmp_path, FULL), environ={"PG_PASSWORD": "s3cret!"})
    assert list(config.gateways) == ["dev", "connect"]
    assert config.default_gateway == "connect"
    dev = config.gateway("dev")
    assert dev.connection.master == "spark://cluster:7077"
    assert dev.connection.config == (("spark.sql.shuffle.partitions", "4"), ("spark.sql.adaptive.enabled", "true"))
    assert dev.connection.catalog == "spark_catalog"
    assert dev.state_connection.type == "postgres"
    assert (dev.state_connection.host, dev.state_connection.port) == ("db.internal", 6543)
    assert dev.state_connection.password == "s3cret!"
    assert dev.test_connection.master == "local[1]"
    assert config.gateway().connection.remote == "sc://spark:15002"
    assert config.gateway().connection.master is None
    defaults = config.model_defaults
    assert (defaults.dialect, defaults.kind, defaults.cron, defaults.start, defaults.owner) == \
        ("duckdb", "FULL", "@hourly", "2024-01-01", "data")
    assert config.variables == {"country": "DE", "limit": 10}
    assert config.snapshot_ttl == "in 2 weeks" and config.environment_ttl == "in 1 week"
    assert config.physical_schema_mapping == {"^shop$": "shop_physical"}
    assert config.auto_categorize_changes == "semi" and config.include_unmodified is True
    assert config.cicd_bot == {"type": "github", "merge_method": "squash"}
    assert config.users[0].github_username == "alice-gh"
    assert config.users[0].roles == ("required_approver",)


def test_password_never_in_repr(tmp_path):
    config = load_config(write(tmp_path, FULL), environ={"PG_PASSWORD": "s3cret!"})
    assert "s3cret!" not in repr(config)


def test_minimal_config_gets_local_gateway(tmp_path):
    config = load_config(write(tmp_path, "model_defaults:\n  dialect: spark\n"), environ={})
    assert config.default_gateway == "local"
    gateway = config.gateway()
    assert gateway.connection.master == "local[*]"
    assert gateway.state_connection.type == "sqlite"
    assert gateway.state_connection.database == str(tmp_path.resolve() / ".meshbot" / "state.db")
    assert config.model_defaults.kind is None and config.model_defaults.cron == "@daily"


def test_default_gateway_is_first(tmp_path):
    text = "gateways:\n  b:\n    connection: {type: spark}\n  a:\n    connection: {type: spark}\n" \
           "model_defaults:\n  dialect: spark\n"
    config = load_config(write(tmp_path, text), environ={})
    assert config.default_gateway == "b"
    assert config.gateway("a").state_connection.database.endswith(".meshbot/state.db")


def test_config_yml_is_accepted(tmp_path):
    config = load_config(write(tmp_path, "model_defaults:\n  dialect: spark\n", "config.yml"), environ={})
    assert config.model_defaults.dialect == "spark"


@pytest.mark.parametrize(("key", "value", "reason"), [
    ("environment_ttl", "1 week", "the TTL '1 week' is in the past; write a future span such as 'in 1 week'"),
    ("snapshot_ttl", "3 days ago", "the TTL '3 days ago' is in the past"),
    ("snapshot_ttl", "in a while", "cannot understand the time 'in a while'"),
])
def test_bad_ttl_names_file_line_and_key(tmp_path, key, value, reason):
    text = f"model_defaults:\n  dialect: spark\n{key}: {value}\n"
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text), environ={})
    assert str(info.value).startswith(f"{tmp_path.resolve() / 'config.yaml'}:3: `{key}`: {reason}")


@pytest.mark.parametrize("value", ["in 2 hours", "in 30 days", "in 1 month", "in 1 year"])
def test_future_ttls_load(tmp_path, value):
    config = load_config(write(tmp_path, f"model_defaults:\n  dialect: spark\nenvironment_ttl: {value}\n"),
                         environ={})
    assert config.environment_ttl == value


def test_unreadable_default_start_names_the_key(tmp_path):
    with pytest.raises(ConfigError, match=r"config\.yaml: `model_defaults\.start`: cannot understand the time 'soon'"):
        load_config(write(tmp_path, "model_defaults:\n  dialect: spark\n  start: soon\n"), environ={})


def test_dialect_is_required(tmp_path):
    with pytest.raises(ConfigError, match=r"config\.yaml.*model_defaults\.dialect"):
        load_config(write(tmp_path, "model_defaults:\n  cron: '@daily'\n"), environ={})


def test_missing_env_var_names_only_that_variable(tmp_path):
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, FULL), environ={"COUNTRY": "FR", "OTHER": "hidden-value"})
    message = str(info.value)
    assert "PG_PASSWORD" in message and "config.yaml" in message
    assert "hidden-value" not in message and "FR" not in message


def test_malformed_yaml_names_file_and_line(tmp_path):
    text = "model_defaults:\n  dialect: spark\nvariables: [1, 2\nother: x\n"
    with pytest.raises(ConfigError, match=r"config\.yaml:4"):
        load_config(write(tmp_path, text), environ={})


def test_malformed_yaml_does_not_echo_secrets(tmp_path):
    text = "model_defaults:\n  dialect: spark\npassword: {{ env_var('PW') }}\n  bad: [\n"
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text), environ={"PW": "topsecret"})
    assert "topsecret" not in str(info.value)


def test_unknown_gateway_and_bad_types(tmp_path):
    config = load_config(write(tmp_path, "model_defaults:\n  dialect: spark\n"), environ={})
    with pytest.raises(ConfigError, match="unknown gateway `prod`"):
        config.gateway("prod")
    bad = "gateways:\n  g:\n    connection:\n      type: duckdb\nmodel_defaults:\n  dialect: spark\n"
    with pytest.raises(ConfigError, match="gateways.g.connection.*duckdb.*Spark gateways here: none"):
        load_config(write(tmp_path, bad), environ={}).gateway()


def test_a_sqlmesh_projects_other_gateways_are_refused_only_when_chosen(tmp_path, capsys):
    """A project keeps its DuckDB gateway (and SQLMesh's DuckDB test connection) beside a Spark one."""
    from bot.redact import redact

    text = ("gateways:\n  duck:\n    connection:\n      type: duckdb\n      database: shop.duckdb\n"
            "  warehouse:\n    connection:\n      type: postgres\n      password: Sup3r-Secret-Pw\n"
            "  numbers:\n    connection:\n      type: mysql\n      password: 98765432\n"
            "  spark:\n    connection:\n      type: spark\n      master: local[1]\n"
            "    test_connection:\n      type: duckdb\n"
            "model_defaults:\n  dialect: duckdb\n")
    config = load_config(write(tmp_path, text), environ={})
    assert config.default_gateway == "spark" and config.gateway().connection.master == "local[1]"
    assert config.gateway().test_connection is None
    assert "`gateways.spark.test_connection` of type `duckdb` is ignored: unit tests run on local Spark" \
        in capsys.readouterr().err
    with pytest.raises(ConfigError) as chosen:
        config.gateway("duck")
    assert str(chosen.value).endswith("`gateways.duck.connection`: connection type `duckdb` is not supported "
                                      "(only `spark`); choose a Spark gateway with --gateway or `default_gateway` "
                                      "(Spark gateways here: spark)")
    assert redact("password Sup3r-Secret-Pw, 98765432") == "password ***, ***"
    explicit = load_config(write(tmp_path, text + "default_gateway: duck\n"), environ={})
    with pytest.raises(ConfigError, match="connection type `duckdb` is not supported"):
        explicit.gateway()


def test_a_spark_gateway_meshbot_refuses_is_refused_only_when_chosen(tmp_path):
    """SQLMesh connects only the gateway it uses: a Spark gateway whose state is DuckDB stops nothing
    until it is chosen, and then its error names the setting (a bad port on the gateway in use too)."""
    text = ("gateways:\n  lake:\n    connection:\n      type: spark\n    state_connection:\n      type: duckdb\n"
            "      database: db.db\n  ci:\n    connection:\n      type: spark\n    state_connection:\n"
            "      type: postgres\n      port: nope\n      password: Pg-Secret-9\n"
            "  compat:\n    connection:\n      type: spark\n"
            "default_gateway: compat\nmodel_defaults:\n  dialect: spark\n")
    config = load_config(write(tmp_path, text), environ={})
    assert config.gateway().name == "compat" and sorted(config.invalid_gateways) == ["ci", "lake"]
    with pytest.raises(ConfigError) as chosen:
        config.gateway("lake")
    assert str(chosen.value).endswith("config.yaml: `gateways.lake.state_connection`: state connection type "
                                      "`duckdb` is not supported (sqlite or postgres)")
    with pytest.raises(ConfigError, match=r"`gateways.ci.state_connection.port` must be an integer"):
        load_config(write(tmp_path, text.replace("default_gateway: compat", "default_gateway: ci")),
                    environ={}).gateway()
    from bot.redact import redact
    assert redact("pw Pg-Secret-9") == "pw ***"
    first = load_config(write(tmp_path, text.replace("default_gateway: compat\n", "")), environ={})
    assert first.default_gateway == "compat"   # the first gateway meshbot can run on, as before


def test_missing_config_file(tmp_path):
    with pytest.raises(ConfigError, match="no config.yaml"):
        load_config(tmp_path, environ={})


@pytest.mark.parametrize(("connection", "state", "expected"), [
    ("master: local[*]", "type: sqlite", ("state", "catalog", "warehouse")),
    ("master: local[*]", "type: postgres", ("catalog", "warehouse")),
    ("remote: sc://spark:15002", "type: postgres", ()),
    ("remote: sc://spark:15002", "type: sqlite", ("state",)),
    ("master: yarn\n      config:\n        spark.hadoop.hive.metastore.uris: thrift://hms:9083\n"
     "        spark.sql.warehouse.dir: s3a://lake/warehouse", "type: postgres", ()),
    ("master: yarn\n      config:\n        spark.hadoop.javax.jdo.option.ConnectionURL: "
     "jdbc:postgresql://db/hms\n        spark.sql.warehouse.dir: s3a://lake/wh", "type: postgres", ()),
    ("master: yarn\n      config:\n        spark.hadoop.javax.jdo.option.ConnectionURL: "
     "'jdbc:derby:;databaseName=ms;create=true'", "type: postgres", ("catalog", "warehouse")),
    ("master: yarn\n      config:\n        spark.sql.catalogImplementation: in-memory\n"
     "        spark.sql.warehouse.dir: hdfs:///wh", "type: postgres", ("catalog",)),
])
def test_what_a_gateway_keeps_only_on_this_machine(tmp_path, connection, state, expected):
    """What the bot refuses on a GitHub Actions runner: state, catalog or warehouse that vanish with it."""
    (tmp_path / "config.yaml").write_text(
        f"gateways:\n  g:\n    connection:\n      type: spark\n      {connection}\n"
        f"    state_connection:\n      {state}\nmodel_defaults:\n  dialect: spark\n")
    parts = load_config(tmp_path).gateway().machine_local_storage()
    assert tuple(part.split(":")[0] for part in parts) == expected


STATE_TEMPLATE = """
gateways:
  g:
    state_connection:
      type: postgres
      host: db.internal
      port: {{ env_var('PG_PORT', '5432') }}
      user: bot
      password: %s
      schema: meshbot
model_defaults:
  dialect: spark
"""


@pytest.mark.parametrize("written", ["\"{{ env_var('PW') }}\"", "'{{ env_var('PW') }}'",
                                     "{{ env_var('PW') }}"])
@pytest.mark.parametrize("secret", ['ab"c\n      schema: evil\n      host: attacker',
                                    "it's: {x}\n- [", "  spaced\ttab  ", "#not-a-comment"])
def test_env_var_values_are_values_not_yaml(tmp_path, written, secret):
    """A password holding quotes, colons or newlines is the password; no other key changes."""
    config = load_config(write(tmp_path, STATE_TEMPLATE % written),
                         environ={"PW": secret, "PG_PORT": "6543"})
    state = config.gateway("g").state_connection
    assert state.password == secret
    assert (state.host, state.port, state.schema, state.user) == ("db.internal", 6543, "meshbot", "bot")


def test_env_var_keeps_plain_scalar_types_and_control_blocks(tmp_path):
    text = ("model_defaults:\n  dialect: spark\n"
            "variables:\n  n: {{ env_var('N') }}\n  quoted: \"{{ env_var('N') }}\"\n"
            "  mixed: id-{{ env_var('N') }}\n"
            "{% if env_var('STRICT', 'no') == 'yes' %}plan:\n  include_unmodified: true\n{% endif %}")
    config = load_config(write(tmp_path, text), environ={"N": "12", "STRICT": "yes"})
    assert config.variables == {"n": 12, "quoted": "12", "mixed": "id-12"}
    assert config.include_unmodified is True


def test_non_utf8_config_names_file_and_line(tmp_path):
    (tmp_path / "config.yaml").write_bytes(b"model_defaults:\n  dialect: spark\n# caf\xe9\n")
    with pytest.raises(ConfigError, match=r"config\.yaml:3: not UTF-8"):
        load_config(tmp_path, environ={})
