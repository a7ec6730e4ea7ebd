"""Settings dataclasses for config.yaml: gateways, connections, model defaults; secrets kept out of repr."""

from __future__ import annotations

import os
import re
from dataclasses import MISSING, dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from bot.errors import ConfigError
from bot.project.catalogs import Catalogs, catalogs_of
from bot.project.files import read_text, read_yaml, render_env_vars
from bot.project.notifications import NotificationTarget, parse_notification_targets
from bot.timeline.times import TimeParseError, check_ttl, to_ms
from bot.redact import register, register_setting, register_url

IGNORE_PATTERNS = (".ipynb_checkpoints/*",)   # SQLMesh's default; config.yaml's ignore_patterns add to it


def documented(default: Any = MISSING, doc: str = "", *, shown: str | None = None, key: str | None = None,
               shape: str | None = None, **options: Any) -> Any:
    """A dataclass field with its reference text: docs/settings.md is written from `doc` (bot/cli/reference.py).

    `shown` replaces the default in the reference by a phrase (`the default branch`); `key` is the YAML key when
    it is not the field's name (`plan.include_unmodified`); `shape` is its YAML type when the annotation's is not.
    """
    extra = {"shown": shown, "key": key, "shape": shape}
    metadata = {"doc": doc, **{name: value for name, value in extra.items() if value is not None}}
    return field(default=default, metadata=metadata, **options)


@dataclass(frozen=True)
class SparkConnection:
    """`type: spark`: local master by default, a cluster master URL, or Spark Connect (`remote`)."""

    master: str | None = documented(None, "A Spark master URL (`local[4]`, `spark://host:7077`, `yarn`, "
                                          "`k8s://...`): meshbot starts the driver. Set `master` or `remote`.",
                                    shown="local[*]")
    remote: str | None = documented(None, "A Spark Connect server, `sc://host[:port][/;param=value]` (port 15002 "
                                          "by default): the server owns catalog, warehouse and cluster.")
    config: tuple[tuple[str, str], ...] = documented(
        (), "Spark settings (`spark.executor.memory: 8g`), given to the session builder; on Spark Connect a "
            "setting the server refuses stops the command naming it.")
    catalog: str | None = documented(None, "Accepted as SQLMesh writes it; models live in Spark's session catalog.")
    concurrent_tasks: int = documented(4, "How many models a plan or `run` backfills at once, and how many "
                                          "tables and views an apply creates at once, on the one session; "
                                          "a whole number of at least 1.")
    warm: bool = documented(True, "Local masters: the first command that needs Spark starts a Spark Connect "
                                  "server for the project in the background (same warehouse and catalog under "
                                  "`.meshbot/`), and later commands attach to it in well under a second; "
                                  "`meshbot engine stop` stops it. `false`, or the environment variable "
                                  "`MESHBOT_WARM_ENGINE=0`, starts Spark inside each command instead.")
    warm_idle_minutes: float = documented(30, "How long the warm engine (`warm`) waits without any command "
                                              "attached before it stops itself; a number above 0.")


@dataclass(frozen=True)
class StateConnection:
    """`type: sqlite` (database path) or `type: postgres`; the password never appears in repr.

    `config_key` is where it was read (`gateways.ci.state_connection`): errors name it, not the
    host, user or database.
    """

    type: str = documented("sqlite", "`sqlite` (one person, not shared) or `postgres` (`postgresql`): a team "
                                     "and CI share it.")
    database: str | None = documented(None, "SQLite: the file, relative to the project. PostgreSQL: the "
                                            "database (`postgres` when absent).", shown=".meshbot/state.db")
    host: str = documented("127.0.0.1", "PostgreSQL host.")
    port: int = documented(5432, "PostgreSQL port.")
    user: str | None = documented(None, "PostgreSQL user.")
    password: str | None = documented(None, "PostgreSQL password; keep it out of the file with "
                                            "`{{ env_var('NAME') }}`. It never appears in errors or logs.",
                                      repr=False)
    schema: str | None = documented(None, "PostgreSQL schema of the state tables, created on first use.",
                                    shown="public")
    config_key: str = field(default="state_connection", compare=False)


@dataclass(frozen=True)
class Gateway:
    """One entry of `gateways:`: where Spark runs (`connection`), where the state lives, and the unit tests' Spark."""

    name: str
    connection: SparkConnection = SparkConnection()
    state_connection: StateConnection = StateConnection()
    test_connection: SparkConnection | None = None

    def machine_local_storage(self) -> tuple[str, ...]:
        """What this gateway keeps only on the machine running meshbot (gone with a CI runner).

        >>> Gateway("local", state_connection=StateConnection(database="/p/.meshbot/state.db")).machine_local_storage()
        ('state: the SQLite file /p/.meshbot/state.db', 'catalog: an embedded Derby metastore under .meshbot/', 'warehouse: .meshbot/warehouse')
        >>> Gateway("ci", SparkConnection(remote="sc://spark:15002"), StateConnection(type="postgres")).machine_local_storage()
        ()
        """
        parts = []
        if self.state_connection.type == "sqlite":
            parts.append(f"state: the SQLite file {self.state_connection.database or DEFAULT_STATE_DB}")
        if self.connection.remote:
            return tuple(parts)          # a Spark Connect server owns the catalog and the warehouse
        conf = dict(self.connection.config)
        metastore_url = conf.get("spark.hadoop.javax.jdo.option.ConnectionURL", "")
        if conf.get("spark.sql.catalogImplementation") == "in-memory":
            parts.append("catalog: Spark's in-memory catalog")
        elif not conf.get("spark.hadoop.hive.metastore.uris") and (
                not metastore_url or metastore_url.startswith("jdbc:derby:;") or
                (metastore_url.startswith("jdbc:derby:") and not metastore_url.startswith("jdbc:derby://"))):
            parts.append("catalog: an embedded Derby metastore under .meshbot/")
        if not conf.get("spark.sql.warehouse.dir"):
            parts.append("warehouse: .meshbot/warehouse")
        return tuple(parts)


@dataclass(frozen=True)
class ModelDefaults:
    """`model_defaults:`: what a MODEL header does not say."""

    dialect: str = documented("spark", "The SQL dialect of the models (required); meshbot transpiles it to "
                                       "Spark SQL.", shown="required")
    kind: str | None = documented(None, "The kind of a model whose header names none (a Python model: FULL).",
                                  shown="VIEW")
    cron: str = documented("@daily", "How often a model's intervals fall due.")
    start: str | None = documented(None, "The start of a model without `start` (else its parents' earliest "
                                         "start; without parents, the cron tick before the execution time's).")
    owner: str | None = documented(None, "The owner of a model without `owner`.")
    on_destructive_change: str = documented("error", "A forward-only change that drops or retypes columns: "
                                                     "`error`, `warn` or `allow`.")
    catalogs: Catalogs = documented(
        Catalogs(), "A top-level key: the catalog the project was written for (a name or a list), mapped away "
                    "as SQLMesh does, so `jaffle_shop.main.orders` is model `main.orders`.", key="default_catalog",
        shown="none", shape="text or list of text")


@dataclass(frozen=True)
class UserConfig:
    """One entry of `users:`: who approves for the GitHub bot."""

    username: str = documented(doc="A name for the user (else `github_username`).")
    github_username: str | None = documented(None, "The GitHub login.")
    roles: tuple[str, ...] = documented((), "`[required_approver]`: this user's approval counts for deploys.")


@dataclass(frozen=True)
class LinterConfig:
    """The `linter:` section: which rules raise errors, which warn, which never run (lower-case names)."""

    enabled: bool = documented(False, "Run the linter (`meshbot lint`, and before every plan).")
    rules: frozenset[str] = documented(frozenset(), "Rules whose violations are errors: a name, a list or `ALL`.")
    warn_rules: frozenset[str] = documented(frozenset(), "Rules whose violations are warnings.")
    ignored_rules: frozenset[str] = documented(frozenset(), "Rules that never run.")


@dataclass(frozen=True)
class FormatConfig:
    """The `format:` section: sqlglot generator options plus `append_newline` and `no_rewrite_casts`."""

    append_newline: bool = documented(False, "End each formatted file with a newline.")
    no_rewrite_casts: bool = documented(False, "Keep `CAST(x AS t)` as written (no `x::t`).")
    generator_options: tuple[tuple[str, Any], ...] = documented(
        (), "sqlglot's printer options, each a key of `format:`: `normalize`, `pad`, `indent`, "
            "`normalize_functions`, `leading_comma`, `max_text_width`.", key="format.<option>",
        shape="as sqlglot takes it")


@dataclass(frozen=True)
class ProjectConfig:
    """A project's config.yaml (or config.py), parsed."""

    root: Path
    gateways: dict[str, Gateway] = documented(
        doc="Where Spark runs and where the state lives, by name (see the gateway keys below); only "
            "`type: spark` connections run, others are refused when chosen.", shown="`local`: local Spark, SQLite")
    default_gateway: str = documented(doc="The gateway used without `--gateway`.", shown="the first Spark gateway")
    model_defaults: ModelDefaults = documented(doc="What a MODEL header does not say (below); `dialect` is required.")
    variables: dict[str, Any] = documented(doc="Values for `@var` / `var()` in models, macros and Python models.",
                                           default_factory=dict)
    snapshot_ttl: str = documented("in 1 week", "How long a model version no environment uses is kept; must "
                                                "lie in the future (`in 2 weeks`).")
    environment_ttl: str = documented("in 1 week", "How long a dev or PR environment lives after today's midnight.")
    physical_schema_mapping: dict[str, str] = documented(
        doc="A model's schema → the schema of its physical tables (default `sqlmesh__<schema>`).",
        default_factory=dict)
    auto_categorize_changes: str = documented("full", "Accepted as SQLMesh writes it; meshbot categorizes every "
                                                      "change automatically.", key="plan.auto_categorize_changes")
    include_unmodified: bool = documented(False, "Give a dev environment a view for every model, not only the "
                                                 "changed ones.", key="plan.include_unmodified")
    cicd_bot: dict[str, Any] = documented(doc="The GitHub bot's settings (below); read from the default branch.",
                                          default_factory=dict)   # parsed by bot.github.settings
    users: tuple[UserConfig, ...] = documented((), "People and their roles (below).")
    before_all: tuple[str, ...] = documented((), "SQL statements run before every applied plan and run "
                                                 "(macros such as `@this_env` rendered).")
    after_all: tuple[str, ...] = documented((), "SQL statements run after every applied plan and run.")
    linter: LinterConfig = documented(LinterConfig(), "The linter's rules (below).", shown="off")
    format: FormatConfig = documented(FormatConfig(), "How `meshbot format` prints (below).", shown="as `sqlmesh format`")
    notification_targets: tuple[NotificationTarget, ...] = documented(
        (), "Where events go: `slack_webhook` (`url`), `console`, `webhook` (`url`, `headers`), each with "
            "`notify_on: [apply_start, apply_end, apply_failure, run_start, run_end, run_failure, "
            "audit_failure, test_failure]`.")
    strict: bool = documented(False, "A `grain` naming a column the model lacks is an error, not a warning.")
    ignore_patterns: tuple[str, ...] = documented(
        IGNORE_PATTERNS, "Globs of project files not loaded (`models/legacy/*`, `*_old.sql`); they add to "
                         "the default.")
    # gateways meshbot cannot run on (a DuckDB one beside the Spark one): name -> why, said when chosen
    unsupported_gateways: dict[str, str] = field(default_factory=dict)
    # Spark gateways with a setting meshbot refuses (a DuckDB state_connection, a bad port): name -> the
    # error, raised when the gateway is chosen, as SQLMesh connects only the gateway it uses
    invalid_gateways: dict[str, ConfigError] = field(default_factory=dict, compare=False)
    project: str = documented("", "Names this repository in a multi-repo project (SQLMesh's key).")

    def gateway(self, name: str | None = None) -> Gateway:
        key = name or self.default_gateway
        if key in self.invalid_gateways:
            error = self.invalid_gateways[key]
            raise ConfigError(error.detail, path=error.location.path if error.location else self._file(),
                              line=error.location.line if error.location else None)
        if key in self.unsupported_gateways:
            usable = ", ".join(sorted(self.gateways)) or "none; add a gateway with `type: spark`"
            raise ConfigError(f"{self.unsupported_gateways[key]}; choose a Spark gateway with --gateway or "
                              f"`default_gateway` (Spark gateways here: {usable})", path=self._file())
        if key not in self.gateways:
            known = ", ".join(sorted(self.gateways)) or "none"
            raise ConfigError(f"unknown gateway `{key}` (--gateway); known gateways: {known}",
                              path=self._file())
        return self.gateways[key]

    def _file(self) -> Path:
        """The config file the settings came from (config.yaml, config.yml or config.py)."""
        try:
            return find_config_file(self.root)
        except ConfigError:   # settings made in code (tests)
            return self.root / "config.yaml"


# --------------------------------------------------------------------------------------------
# Parsing config.yaml
# --------------------------------------------------------------------------------------------

CONFIG_FILES = ("config.yaml", "config.yml", "config.py")   # config.py: a SQLMesh `Config` object
DEFAULT_STATE_DB = ".meshbot/state.db"
def find_config_file(root: Path) -> Path:
    for name in CONFIG_FILES:
        if (root / name).is_file():
            return root / name
    raise ConfigError(f"no config.yaml (or config.yml, config.py) in {root}", path=root / "config.yaml")


def load_config(root: Path, *, environ: Mapping[str, str] | None = None) -> ProjectConfig:
    """Read `<root>/config.yaml` (or config.yml) into a ProjectConfig; env_var() resolved from `environ`."""
    root = Path(root).resolve()
    path = find_config_file(root)
    if path.suffix == ".py":
        from bot.project.sqlmesh_shim import python_config
        text, raw = "", python_config(path)
    else:
        text, values = render_env_vars(read_text(path), path=path,
                                       environ=os.environ if environ is None else environ)
        raw = read_yaml(path, text, values=values) or {}
    if not isinstance(raw, dict):
        raise ConfigError("config must be a mapping of settings", path=path)
    gateways, unsupported, invalid = _parse_gateways(raw.get("gateways"), root=root, path=path)
    # SQLMesh's default is the first gateway; meshbot's the first it can run on
    default_gateway = str(raw.get("default_gateway") or next(iter(gateways), next(iter([*invalid, *unsupported]), "")))
    if default_gateway not in gateways and default_gateway not in unsupported and default_gateway not in invalid:
        raise ConfigError(f"default_gateway `{default_gateway}` is not one of the gateways: "
                          f"{', '.join([*gateways, *invalid, *unsupported])}", path=path)
    plan = _mapping(raw.get("plan"), "plan", path)
    _warn_unused_keys(raw, text, path)
    return ProjectConfig(
        root=root,
        gateways=gateways,
        unsupported_gateways=unsupported,
        invalid_gateways=invalid,
        default_gateway=default_gateway,
        model_defaults=replace(_parse_model_defaults(raw.get("model_defaults"), path), catalogs=catalogs_of(
            raw.get("default_catalog"), [c.config for g in gateways.values()
                                         for c in (g.connection, g.test_connection) if c is not None], path=path)),
        variables=dict(_mapping(raw.get("variables"), "variables", path)),
        snapshot_ttl=_ttl(raw, "snapshot_ttl", text, path),
        environment_ttl=_ttl(raw, "environment_ttl", text, path),
        physical_schema_mapping={str(k): str(v) for k, v in
                                 _mapping(raw.get("physical_schema_mapping"), "physical_schema_mapping",
                                          path).items()},
        auto_categorize_changes=_parse_auto_categorize(plan.get("auto_categorize_changes"), path),
        include_unmodified=bool(plan.get("include_unmodified", False)),
        cicd_bot=dict(_mapping(raw.get("cicd_bot"), "cicd_bot", path)),
        users=parse_users(raw.get("users"), path),
        before_all=_statements(raw.get("before_all"), "before_all", path),
        after_all=_statements(raw.get("after_all"), "after_all", path),
        linter=_parse_linter(raw.get("linter"), path),
        format=_parse_format(raw.get("format"), path),
        notification_targets=parse_notification_targets(raw.get("notification_targets"), path),
        strict=_flag(raw, "strict", path),
        ignore_patterns=IGNORE_PATTERNS + _statements(raw.get("ignore_patterns"), "ignore_patterns", path,
                                                      what="glob patterns"),
        project=_project_name(raw.get("project"), path),
    )


_CONFIG_KEYS = frozenset({"gateways", "default_gateway", "model_defaults", "variables", "snapshot_ttl",
                          "environment_ttl", "physical_schema_mapping", "plan", "cicd_bot", "users",
                          "before_all", "after_all", "linter", "format", "notification_targets",
                          "default_catalog", "strict", "ignore_patterns", "project"})


def _project_name(value: Any, path: Path) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"`project` must be a name (got {value!r})", path=path)
    return value.strip()


def _flag(raw: dict, key: str, path: Path) -> bool:
    value = raw.get(key, False)
    if not isinstance(value, bool):
        raise ConfigError(f"`{key}` must be true or false (got {value!r})", path=path)
    return value


def _statements(value: Any, key: str, path: Path, *, what: str = "SQL statements") -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ConfigError(f"`{key}` must be a list of {what}", path=path)
    return tuple(value)
_MODEL_DEFAULT_KEYS = frozenset({"dialect", "kind", "cron", "start", "owner", "on_destructive_change"})
_PLAN_KEYS = frozenset({"auto_categorize_changes", "include_unmodified"})


def _ttl(raw: dict, key: str, text: str, path: Path) -> str:
    """A TTL setting ('in 1 week' when absent), refused at load when it cannot be read or is not in the future."""
    value = str(raw.get(key) or "in 1 week")
    try:
        check_ttl(value)
    except TimeParseError as error:
        raise ConfigError(f"`{key}`: {error.detail}", path=path, line=_key_line(text, key)) from None
    return value


def _key_line(text: str, key: str, *, indent: str = "") -> int | None:
    match = re.search(rf"^{indent}{re.escape(key)}\s*:", text, re.M)
    return text.count("\n", 0, match.start()) + 1 if match else None


def _warn_unused_keys(raw: dict, text: str, path: Path) -> None:
    """A config key meshbot does not use is a warning naming it and its line (never silently dropped)."""
    from bot.project.warn import project_warning

    for key in raw:
        if key not in _CONFIG_KEYS:
            project_warning(f"config key `{key}` is not supported by meshbot and is ignored", path=path,
                            line=_key_line(text, str(key)))
    for section, known in (("model_defaults", _MODEL_DEFAULT_KEYS), ("plan", _PLAN_KEYS)):
        value = raw.get(section)
        for key in value if isinstance(value, dict) else ():
            if key not in known:
                project_warning(f"config key `{section}.{key}` is not supported by meshbot and is ignored",
                                path=path, line=_key_line(text, str(key), indent=r"[ \t]+"))


def _mapping(value: Any, key: str, path: Path) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"`{key}` must be a mapping", path=path)
    return value


def _parse_gateways(raw: Any, *, root: Path, path: Path
                    ) -> tuple[dict[str, Gateway], dict[str, str], dict[str, ConfigError]]:
    """(the Spark gateways, {name: why not} for the others, {name: error} for Spark gateways meshbot refuses).

    A project written for SQLMesh keeps its DuckDB (or other) gateways beside a Spark one: those
    are refused only when chosen. Their secrets are still registered, so no error or log shows them.
    So is a Spark gateway with a setting meshbot refuses (a DuckDB `state_connection`): SQLMesh
    connects only the gateway it uses, and so does meshbot; choosing it raises the setting's error.
    """
    if not raw:
        return {"local": Gateway(name="local", connection=SparkConnection(master="local[*]"),
                                 state_connection=_default_state(root))}, {}, {}
    gateways: dict[str, Gateway] = {}
    unsupported: dict[str, str] = {}
    invalid: dict[str, ConfigError] = {}
    for name, spec in _mapping(raw, "gateways", path).items():
        try:
            gateway = _parse_gateway(str(name), spec, root=root, path=path)
        except ConfigError as error:
            _register_secrets(spec)
            invalid[str(name)] = error
            continue
        if isinstance(gateway, str):
            unsupported[str(name)] = gateway
        else:
            gateways[str(name)] = gateway
    return gateways, unsupported, invalid


def _parse_gateway(name: str, spec: Any, *, root: Path, path: Path) -> Gateway | str:
    """One gateway: a Gateway, or why meshbot cannot run on it (a connection other than Spark)."""
    spec = _mapping(spec, f"gateways.{name}", path)
    where = f"gateways.{name}.connection"
    kind = _connection_type(spec.get("connection"), where, path)
    if kind != "spark":
        _register_secrets(spec)
        return f"`{where}`: connection type `{kind}` is not supported (only `spark`)"
    test = spec.get("test_connection")
    test_kind = _connection_type(test, f"gateways.{name}.test_connection", path) if test is not None else "spark"
    if test_kind != "spark":
        from bot.project.warn import project_warning

        _register_secrets(test)
        project_warning(f"`gateways.{name}.test_connection` of type `{test_kind}` is ignored: unit tests run "
                        "on local Spark", path=path)
        test = None
    return Gateway(
        name=str(name),
        connection=_parse_spark(spec.get("connection"), where, path),
        state_connection=_parse_state(spec.get("state_connection"), root=root,
                                      where=f"gateways.{name}.state_connection", path=path),
        test_connection=(_parse_spark(test, f"gateways.{name}.test_connection", path)
                         if test is not None else None),
    )


def _connection_type(raw: Any, where: str, path: Path) -> str:
    return str(_mapping(raw, where, path).get("type", "spark")).lower()


def _register_secrets(spec: Any, name: str = "") -> None:
    """Every setting of a connection meshbot does not use that names a secret (or holds credentials)."""
    if isinstance(spec, dict):
        for key, value in spec.items():
            _register_secrets(value, str(key))
    elif isinstance(spec, (list, tuple)):
        for value in spec:
            _register_secrets(value, name)
    elif isinstance(spec, (str, int, float)) and not isinstance(spec, bool):   # `password: 98765432` too
        register_setting(name, spec)


def _default_state(root: Path) -> StateConnection:
    return StateConnection(type="sqlite", database=str(root / DEFAULT_STATE_DB))


def _parse_spark(raw: Any, where: str, path: Path) -> SparkConnection:
    spec = _mapping(raw, where, path)
    kind = str(spec.get("type", "spark")).lower()
    if kind != "spark":
        raise ConfigError(f"`{where}`: connection type `{kind}` is not supported (only `spark`)", path=path)
    master, remote = spec.get("master"), spec.get("remote")
    register_url(str(master) if master else None)
    register_url(str(remote) if remote else None)   # a Spark Connect `;token=...`
    if master and remote:
        raise ConfigError(f"`{where}`: set either `master` or `remote`, not both", path=path)
    conf = _mapping(spec.get("config"), f"{where}.config", path)
    for key, value in conf.items():
        register_setting(str(key), value)
    return SparkConnection(
        master=str(master) if master else (None if remote else "local[*]"),
        remote=str(remote) if remote else None,
        config=tuple((str(k), _conf_value(v)) for k, v in conf.items()),
        catalog=str(spec["catalog"]) if spec.get("catalog") else None,
        concurrent_tasks=_concurrent_tasks(spec.get("concurrent_tasks"), f"{where}.concurrent_tasks", path),
        warm=_connection_flag(spec.get("warm"), True, f"{where}.warm", path),
        warm_idle_minutes=_positive(spec.get("warm_idle_minutes"), SparkConnection.warm_idle_minutes,
                                    f"{where}.warm_idle_minutes", path),
    )


def _connection_flag(value: Any, default: bool, key: str, path: Path) -> bool:
    """A YAML boolean (or `true`/`false` text, as `env_var` templates give).

    >>> _connection_flag(None, True, "k", Path("c.yaml")), _connection_flag("false", True, "k", Path("c.yaml"))
    (True, False)
    """
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    raise ConfigError(f"`{key}` must be true or false (got {value!r})", path=path)


def _positive(value: Any, default: float, key: str, path: Path) -> float:
    """A number above 0 (a number-like string too).

    >>> _positive(None, 30, "k", Path("c.yaml")), _positive("0.5", 30, "k", Path("c.yaml"))
    (30, 0.5)
    """
    if value is None:
        return default
    try:
        number = float(value) if not isinstance(value, bool) else 0.0
    except (TypeError, ValueError):
        number = 0.0
    if not number > 0 or number != number or number == float("inf"):
        raise ConfigError(f"`{key}` must be a number above 0 (got {value!r})", path=path)
    return number


def _concurrent_tasks(value: Any, key: str, path: Path) -> int:
    """A whole number >= 1 (a number-like string, as `env_var` templates give, counts too).

    >>> _concurrent_tasks(None, "k", Path("c.yaml")), _concurrent_tasks("2", "k", Path("c.yaml"))
    (4, 2)
    >>> _concurrent_tasks(0, "gateways.local.connection.concurrent_tasks", Path("config.yaml"))
    Traceback (most recent call last):
    ...
    bot.errors.ConfigError: config.yaml: `gateways.local.connection.concurrent_tasks` must be a whole number of at least 1 (got 0)
    """
    if value is None:
        return SparkConnection.concurrent_tasks
    number = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.strip().isdigit():
        number = int(value.strip())
    if number is None or number < 1:
        raise ConfigError(f"`{key}` must be a whole number of at least 1 (got {value!r})", path=path)
    return number


def _conf_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _parse_state(raw: Any, *, root: Path, where: str, path: Path) -> StateConnection:
    if raw is None:
        return _default_state(root)
    spec = _mapping(raw, where, path)
    kind = str(spec.get("type", "sqlite")).lower()
    if kind in ("postgresql", "postgres"):
        port = spec.get("port", 5432)
        try:
            port = int(port)
        except (TypeError, ValueError):
            raise ConfigError(f"`{where}.port` must be an integer", path=path) from None
        password = spec.get("password")
        register(password)
        return StateConnection(
            type="postgres", database=_opt_str(spec.get("database")),
            host=str(spec.get("host", "127.0.0.1")), port=port, user=_opt_str(spec.get("user")),
            password=str(password) if password is not None else None,
            schema=_opt_str(spec.get("schema")), config_key=where)
    if kind == "sqlite":
        database = Path(str(spec.get("database") or DEFAULT_STATE_DB)).expanduser()
        return StateConnection(type="sqlite", database=str(database if database.is_absolute()
                                                            else root / database), config_key=where)
    raise ConfigError(f"`{where}`: state connection type `{kind}` is not supported "
                      "(sqlite or postgres)", path=path)


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


def _parse_model_defaults(raw: Any, path: Path) -> ModelDefaults:
    spec = _mapping(raw, "model_defaults", path)
    if not spec.get("dialect"):
        raise ConfigError("`model_defaults.dialect` is required (e.g. `dialect: spark`)", path=path)
    kind = spec.get("kind")
    if isinstance(kind, dict):
        kind = kind.get("name")
    on_change = str(spec.get("on_destructive_change", "error")).lower()
    if on_change not in ("error", "warn", "allow"):
        raise ConfigError("`model_defaults.on_destructive_change` must be error, warn or allow", path=path)
    start = spec.get("start")
    if start is not None:
        try:
            to_ms(str(start), relative_base=0)
        except TimeParseError as error:
            raise ConfigError(f"`model_defaults.start`: {error.detail}", path=path) from None
    return ModelDefaults(
        dialect=str(spec["dialect"]).lower(),
        kind=str(kind).upper() if kind else None,
        cron=str(spec.get("cron") or "@daily"),
        start=str(start) if start is not None else None,
        owner=_opt_str(spec.get("owner")),
        on_destructive_change=on_change,
    )


def _parse_auto_categorize(raw: Any, path: Path) -> str:
    if isinstance(raw, dict):
        raw = raw.get("sql", "full")
    value = str(raw or "full").lower()
    if value not in ("full", "semi", "off"):
        raise ConfigError("`plan.auto_categorize_changes` must be full, semi or off", path=path)
    return value


def parse_users(raw: Any, path: Path | str) -> tuple[UserConfig, ...]:
    """`users:` (config.yaml, or the GitHub bot's trusted settings) → UserConfigs; `path` names the source."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise ConfigError("`users` must be a list", path=path)
    users = []
    for index, spec in enumerate(raw):
        spec = _mapping(spec, f"users[{index}]", path)
        username = spec.get("username") or spec.get("github_username")
        if not username:
            raise ConfigError(f"`users[{index}]` needs a `username` or `github_username`", path=path)
        if spec.get("notification_targets"):
            from bot.project.warn import project_warning
            project_warning(f"`users[{index}].notification_targets` (per-user targets) is not supported by "
                            "meshbot and is ignored; use the top-level `notification_targets`", path=path)
        roles = spec.get("roles") or ()
        users.append(UserConfig(username=str(username),
                                github_username=_opt_str(spec.get("github_username")),
                                roles=tuple(str(r).lower() for r in roles)))
    return tuple(users)


def _rule_names(value: Any, key: str, path: Path) -> frozenset[str]:
    """`rules: ALL`, `rules: [a, b]` or `rules: a` → lower-case names (`all` stands for every rule)."""
    if value is None:
        return frozenset()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple, set)) or not all(isinstance(i, str) for i in items):
        raise ConfigError(f"`linter.{key}` must be a rule name, a list of rule names or ALL", path=path)
    return frozenset(i.strip().lower() for i in items)


def _parse_linter(raw: Any, path: Path) -> LinterConfig:
    spec = _mapping(raw, "linter", path)
    for key in spec:
        if key not in ("enabled", "rules", "warn_rules", "ignored_rules", "use_project_index"):
            from bot.project.warn import project_warning
            project_warning(f"config key `linter.{key}` is not supported by meshbot and is ignored", path=path)
    return LinterConfig(enabled=bool(spec.get("enabled", False)),
                        rules=_rule_names(spec.get("rules"), "rules", path),
                        warn_rules=_rule_names(spec.get("warn_rules"), "warn_rules", path),
                        ignored_rules=_rule_names(spec.get("ignored_rules"), "ignored_rules", path))


_FORMAT_OPTIONS = ("normalize", "pad", "indent", "normalize_functions", "leading_comma", "max_text_width")


def _parse_format(raw: Any, path: Path) -> FormatConfig:
    spec = _mapping(raw, "format", path)
    unknown = sorted(set(spec) - {"append_newline", "no_rewrite_casts", *_FORMAT_OPTIONS})
    if unknown:
        raise ConfigError(f"unknown `format` option(s): {', '.join(unknown)}; known: append_newline, "
                          f"no_rewrite_casts, {', '.join(_FORMAT_OPTIONS)}", path=path)
    return FormatConfig(append_newline=bool(spec.get("append_newline", False)),
                        no_rewrite_casts=bool(spec.get("no_rewrite_casts", False)),
                        generator_options=tuple((k, spec[k]) for k in _FORMAT_OPTIONS if k in spec))
