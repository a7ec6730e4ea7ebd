"""Issue 24, "many actors, one warehouse": seeded rounds of real `meshbot` processes started together on
ONE PostgreSQL state (a database of its own) and ONE catalog (the session's Spark Connect server).

Each round makes a new change to `events` (its amount times the round's factor) and starts, each as its
own process with its own copy of the project: two PR environments backfilling that same new version
(`plan pra`, `plan prb`), a deploy of it (`plan prod`), a scheduled `run prod`, `invalidate <env>
--sync` of an environment sharing tables with the others, and `janitor --ignore-ttl`. The seed picks
which actors run (each kind runs in some round), their start delays, and in one round which actor is
SIGKILLed and when (after a short sleep, or at a bot.faults checkpoint). After every round:

  (a) every live environment's views resolve (each model's view, each finalized unexpired environment
      `meshbot environments --json` lists);
  (b) no physical table holds a key twice (src and events: (ds, id); daily: ds);
  (c) every recorded interval of an `events` version (and of `src`) has its rows in the physical table:
      exactly the rows the project defines for those days;
  (d) no actor printed a Python traceback (a clear one-paragraph error such as "... gave up" or
      "... plan again" is fine).

After the last round one repair pass plans each live environment again, one after another, and every
environment then serves exactly the rows the last round's project defines.

Change SEED (or set MESHBOT_CHAOS_SEED) to explore other schedules, MESHBOT_CHAOS_ROUNDS (up to 3) and
MESHBOT_CHAOS_KILL_EVERY_ROUND=1 for harsher ones; the test prints the seed and, per round, the actors,
their delays, the killed one, each exit code and wall time (pytest -s shows it).
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pytest
import sqlalchemy as sa
import yaml

from conftest import POSTGRES

SEED = int(os.environ.get("MESHBOT_CHAOS_SEED", "22"))
ROUNDS = int(os.environ.get("MESHBOT_CHAOS_ROUNDS", "2"))   # every kind of actor runs in one of them (at most 3)
# One actor is SIGKILLed in one round; MESHBOT_CHAOS_KILL_EVERY_ROUND=1 kills one in every round.
KILL_EVERY_ROUND = os.environ.get("MESHBOT_CHAOS_KILL_EVERY_ROUND", "") == "1"
LEASE_WAIT_S = "60"        # MESHBOT_LEASE_WAIT of every actor: a stuck lease fails the round, not the suite
ACTOR_TIMEOUT_S = 150
# A dev environment matching prod is still created (a PR environment planned after the deploy of its change).
PLAN = ("--auto-apply", "--no-prompts", "--include-unmodified")

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
FIRST = date(2024, 1, 1)
SRC_DAYS = 10                               # src: 2024-01-01 .. 2024-01-10, ids 1..3
IDS = (1, 2, 3)
SETUP_TIME = date(2024, 1, 5)               # prod and `stale` planned before the rounds: 4 days of events
# Round r (1-based) plans and runs at SETUP_TIME + r days: each round's run has a new day to compute,
# and each new version a backfill of 4 + r daily batches.
FACTORS = (1, 2, 3, 5)                      # events' amount factor: setup, then one per round

SRC = """\
MODEL (name {schema}.src, kind FULL);
SELECT CAST(d AS STRING) AS ds, id, CAST(day(d) AS INT) * 10 + id AS amount
FROM (SELECT explode(sequence(DATE'2024-01-01', DATE'2024-01-{last:02d}', INTERVAL 1 DAY)) AS d)
LATERAL VIEW explode(array(1, 2, 3)) t AS id
"""
EVENTS = """\
MODEL (name {schema}.events, kind INCREMENTAL_BY_TIME_RANGE (time_column ds, batch_size 1),
       start '2024-01-01');
SELECT ds, id, amount * {factor} AS amount FROM {schema}.src WHERE ds BETWEEN @start_ds AND @end_ds
"""
DAILY = """\
MODEL (name {schema}.daily, kind FULL);
SELECT ds, COUNT(*) AS n, SUM(amount) AS total FROM {schema}.events GROUP BY ds
"""
MODELS = ("src", "events", "daily")
KEYS = {"src": ("ds", "id"), "events": ("ds", "id"), "daily": ("ds",)}

pytestmark = [pytest.mark.spark, pytest.mark.postgres]


# -- what the project defines --------------------------------------------------------------------------

def _day(offset: int) -> str:
    return (FIRST + timedelta(days=offset)).isoformat()


def src_rows() -> list[list]:
    return sorted([_day(i), k, (i + 1) * 10 + k] for i in range(SRC_DAYS) for k in IDS)


def events_rows(factor: int, days: set[str] | None = None) -> list[list]:
    return sorted([ds, k, amount * factor] for ds, k, amount in src_rows() if days is None or ds in days)


def daily_rows(factor: int, days: set[str]) -> list[list]:
    totals: dict[str, list] = {}
    for ds, _, amount in events_rows(factor, days):
        totals.setdefault(ds, [ds, 0, 0])
        totals[ds][1] += 1
        totals[ds][2] += amount
    return sorted(totals.values())


def days_before(execution_time: date) -> set[str]:
    return {_day(i) for i in range((execution_time - FIRST).days)}


# -- the project and the actors ------------------------------------------------------------------------

def write_project(root: Path, schema: str, factor: int, url: str, database: str) -> Path:
    (root / "models").mkdir(parents=True, exist_ok=True)
    state = {"type": "postgres", "host": POSTGRES["host"], "port": POSTGRES["port"],
             "user": POSTGRES["user"], "database": database}
    config = {"gateways": {"chaos": {"connection": {"type": "spark", "remote": url},
                                     "state_connection": state}},
              "default_gateway": "chaos",
              "model_defaults": {"dialect": "spark", "start": "2024-01-01", "cron": "@daily"}}
    (root / "config.yaml").write_text(yaml.safe_dump(config))
    for name, text in (("src", SRC), ("events", EVENTS), ("daily", DAILY)):
        (root / "models" / f"{name}.sql").write_text(text.format(schema=schema, factor=factor, last=SRC_DAYS))
    return root


def actor_env(kill_at: str | None = None) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("SPARK_", "PYSPARK_", "GITHUB_", "MESHBOT_"))}
    env.update(PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1", MESHBOT_LEASE_WAIT=LEASE_WAIT_S)
    if kill_at:
        env["MESHBOT_KILL_AT"] = kill_at
    return env


def meshbot(root: Path, *args: str) -> subprocess.CompletedProcess:
    """One meshbot command, waited for (setup, listings, the repair pass)."""
    return subprocess.run([PYTHON, "-m", "bot", "-p", str(root), *args], cwd=ROOT, env=actor_env(),
                          capture_output=True, text=True, timeout=ACTOR_TIMEOUT_S)


@dataclass
class Actor:
    name: str
    args: tuple[str, ...]
    delay: float = 0.0
    kill: str | None = None             # "after 3.2s" or a checkpoint "mid-backfill:2"
    process: subprocess.Popen | None = None
    started: float = 0.0
    ended: float = 0.0
    out: Path | None = None
    err: Path | None = None
    killed: bool = False

    @property
    def code(self) -> int | None:
        return None if self.process is None else self.process.returncode

    def stderr(self) -> str:
        return self.err.read_text(errors="replace") if self.err and self.err.exists() else ""

    def stdout(self) -> str:
        return self.out.read_text(errors="replace") if self.out and self.out.exists() else ""

    def start(self, root: Path, logs: Path) -> None:
        kill_at = self.kill if self.kill and not self.kill.startswith("after ") else None
        self.out, self.err = logs / f"{self.name}.out", logs / f"{self.name}.err"
        with self.out.open("w") as out, self.err.open("w") as err:
            self.process = subprocess.Popen([PYTHON, "-m", "bot", "-p", str(root), *self.args], cwd=ROOT,
                                            env=actor_env(kill_at), stdin=subprocess.DEVNULL,
                                            stdout=out, stderr=err, text=True)
        self.started = time.monotonic()

    def summary(self) -> str:
        code = self.code
        outcome = ("killed (SIGKILL)" if code == -signal.SIGKILL else f"exit {code}")
        line = f"  {self.name:<10} +{self.delay:.1f}s  {outcome:<16} {self.ended - self.started:5.1f}s"
        if self.kill:
            line += f"  [kill {self.kill}{'' if code == -signal.SIGKILL else ': not reached'}]"
        if code not in (0, -signal.SIGKILL):
            last = [line for line in self.stderr().strip().splitlines() if line.strip()]
            line += "  " + (last[-1][:300] if last else "(no stderr)")
        return line


def run_actors(actors: list[Actor], roots: dict[str, Path], logs: Path) -> None:
    """Start every actor at its delay (from one moment), SIGKILL the timed victim, wait for all."""
    logs.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    pending = sorted(actors, key=lambda a: a.delay)
    running: list[Actor] = []
    deadline = t0 + ACTOR_TIMEOUT_S
    while pending or running:
        now = time.monotonic()
        while pending and now - t0 >= pending[0].delay:
            actor = pending.pop(0)
            actor.start(roots[actor.name], logs)
            running.append(actor)
        for actor in list(running):
            if actor.process.poll() is not None:
                actor.ended = time.monotonic()
                running.remove(actor)
            elif actor.kill and actor.kill.startswith("after ") and not actor.killed \
                    and now - actor.started >= float(actor.kill[6:-1]):
                os.kill(actor.process.pid, signal.SIGKILL)   # our own child, by its pid
                actor.killed = True
        if now > deadline:
            for actor in running:
                os.kill(actor.process.pid, signal.SIGKILL)
                actor.process.wait()
            pytest.fail("actors still running after %ds: %s" % (ACTOR_TIMEOUT_S, [a.name for a in running]))
        time.sleep(0.05)


# -- reading the warehouse and the state ----------------------------------------------------------------

# Each batch reads through a new Connect session, as a new reader would: a long-lived session keeps its
# listing of a table's files, and finds them gone once a writer replaced them (FAILED_READ_FILE), which is
# Spark's caching (REFRESH TABLE), not something meshbot could prevent in another client's session.
READER = r"""
import json, sys
from pyspark.sql import SparkSession
for line in sys.stdin:
    s = SparkSession.builder.remote(sys.argv[1]).create()
    out = {}
    for key, sql in json.loads(line).items():
        try:
            out[key] = sorted(list(row) for row in s.sql(sql).collect())
        except Exception as exc:
            out[key] = "unreadable: " + " ".join(str(exc).split())[:400]
    s.stop()
    print(json.dumps(out), flush=True)
"""


class Reader:
    """One long-lived Spark Connect client process answering batches of queries (rows, or the error)."""

    def __init__(self, url: str) -> None:
        self.process = subprocess.Popen([PYTHON, "-c", READER, url], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                        env={k: v for k, v in os.environ.items()
                                             if not k.startswith(("SPARK_", "PYSPARK_"))})

    def query(self, queries: dict[str, str]) -> dict[str, list | str]:
        if not queries:
            return {}
        self.process.stdin.write(json.dumps(queries) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        assert line, "the Spark reader process died"
        return json.loads(line)

    def close(self) -> None:
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def state_engine(database: str) -> sa.Engine:
    return sa.create_engine(sa.engine.URL.create(
        "postgresql+psycopg2", username=POSTGRES["user"], host=POSTGRES["host"], port=POSTGRES["port"],
        database=database))


def recorded(engine: sa.Engine, schema: str) -> dict[tuple[str, str], set[str]]:
    """(model, version) -> the days of its recorded (not removed, not dev) intervals."""
    with engine.connect() as conn:
        rows = conn.execute(sa.text(
            "SELECT name, version, start_ts, end_ts FROM intervals WHERE NOT is_removed AND NOT is_dev")).all()
    days: dict[tuple[str, str], set[str]] = {}
    for name, version, start, end in rows:
        model = name.split(".", 1)[1] if name.startswith(f"{schema}.") else None
        if model is None:
            continue
        covered = days.setdefault((model, version), set())
        for ms in range(start, end, 86_400_000):
            covered.add(datetime.fromtimestamp(ms / 1000, timezone.utc).date().isoformat())
    return days


def factors_of_versions(engine: sa.Engine, schema: str) -> dict[str, int]:
    """The factor each stored `events` version multiplies by, read from its rendered query."""
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT version, rendered_query FROM snapshots WHERE name = :n"),
                            {"n": f"{schema}.events"}).all()
    factors = {}
    for version, query in rows:
        match = re.search(r"\*\s*(\d+)", query)
        assert match, query
        factors[version] = int(match.group(1))
    return factors


def physical(schema: str, model: str, version: str) -> str:
    return f"sqlmesh__{schema}.{schema}__{model}__{version}"


def list_environments(root: Path) -> subprocess.Popen:
    """`meshbot environments --json`, started (it runs while the warehouse is read)."""
    return subprocess.Popen([PYTHON, "-m", "bot", "-p", str(root), "environments", "--json"], cwd=ROOT,
                            env=actor_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def live_environments(listing: subprocess.Popen) -> tuple[list[str], list[str]]:
    """(finalized unexpired environments, the others' names) from `meshbot environments --json`."""
    out, err = listing.communicate(timeout=ACTOR_TIMEOUT_S)
    assert listing.returncode == 0, out + err
    now = datetime.now(timezone.utc)
    live, other = [], []
    for env in json.loads(out):
        expires = env.get("expires_at")
        expired = expires is not None and datetime.fromisoformat(expires.replace("Z", "+00:00")) <= now
        (other if expired or not env.get("finalized_at") else live).append(env["name"])
    return sorted(live), sorted(other)


def view(schema: str, env: str, model: str) -> str:
    return f"`{schema}`.`{model}`" if env == "prod" else f"`{schema}__{env}`.`{model}`"


def check_round(label: str, reader: Reader, engine: sa.Engine, schema: str, root: Path,
                actors: list[Actor]) -> list[str]:
    """Problems with (a)-(d) after a round, as lines (empty: all held)."""
    problems: list[str] = []
    # (d) a clear error, never a traceback
    for actor in actors:
        if "Traceback (most recent call last)" in actor.stderr() + actor.stdout():
            problems.append(f"(d) {actor.name} printed a traceback:\n{actor.stderr()[-3000:]}")
    listing = list_environments(root)
    # (b) no physical table holds a key twice; (c) every recorded interval has its rows
    queries: dict[str, str] = {}
    tables = reader.query({"tables": f"SHOW TABLES IN `sqlmesh__{schema}`"})["tables"]
    assert isinstance(tables, list), tables
    names = [row[1] for row in tables]
    for name in names:
        model = next((m for m in MODELS if name.startswith(f"{schema}__{m}__")), None)
        if model is None:
            continue
        key = ", ".join(KEYS[model])
        queries[f"dup {name}"] = (f"SELECT {key}, COUNT(*) FROM `sqlmesh__{schema}`.`{name}` "
                                  f"GROUP BY {key} HAVING COUNT(*) > 1")
    intervals = recorded(engine, schema)
    factors = factors_of_versions(engine, schema)
    expected: dict[str, list] = {}
    for (model, version), days in sorted(intervals.items()):
        if model not in ("src", "events") or not days:
            continue
        table = physical(schema, model, version)
        in_days = " OR ".join(f"ds = '{day}'" for day in sorted(days))
        queries[f"rows {table}"] = f"SELECT ds, id, amount FROM {table} WHERE {in_days}"
        if model == "src":
            expected[f"rows {table}"] = [[row for row in src_rows() if row[0] in days]]
        elif version in factors:
            expected[f"rows {table}"] = [events_rows(factors[version], days)]
        else:   # intervals outliving their snapshot (a janitor racing a writer): any round's rows will do
            expected[f"rows {table}"] = [events_rows(factor, days) for factor in FACTORS]
    # (a) every live environment's views resolve
    live, other = live_environments(listing)
    print(f"  environments: live {live}, expired or unfinalized {other}")
    queries.update({f"view {env}.{model}": f"SELECT * FROM {view(schema, env, model)}"
                    for env in live for model in MODELS})
    answers = reader.query(queries)
    for key, rows in sorted(answers.items()):
        if key.startswith("view ") and isinstance(rows, str):
            problems.append(f"(a) {key}: {rows}")
        elif key.startswith("dup ") and isinstance(rows, str):
            problems.append(f"(b) {key[4:]}: {rows}")
        elif key.startswith("dup ") and rows:
            problems.append(f"(b) {key[4:]} holds keys more than once: {rows[:5]}")
        elif key.startswith("rows ") and isinstance(rows, str):
            problems.append(f"(c) {key[5:]}: {rows}")
        elif key.startswith("rows ") and rows not in expected[key]:
            have, want = Counter(map(tuple, rows)), Counter(map(tuple, expected[key][0]))
            missing, extra = list((want - have).elements()), list((have - want).elements())
            problems.append(f"(c) {key[5:]}: recorded intervals without their rows: "
                            f"missing {missing[:6]} ({len(missing)}), unexpected or twice {extra[:6]} ({len(extra)})")
    events = {v: sorted(d) for (m, v), d in intervals.items() if m == "events" and d}
    print(f"  {label}: {len(names)} physical tables; events versions with intervals: "
          + ", ".join(f"{v[:8]} x{factors.get(v)} {len(d)} days" for v, d in events.items()))
    return problems


# -- the rounds ------------------------------------------------------------------------------------------

@dataclass
class Round:
    number: int
    factor: int
    execution_time: date
    actors: list[Actor] = field(default_factory=list)


def plan_rounds(rng: random.Random) -> list[Round]:
    kill_round = rng.randrange(ROUNDS)
    rounds: list[Round] = []
    invalidatable, ran = ["stale"], set()
    for index in range(ROUNDS):
        when = (SETUP_TIME + timedelta(days=index + 1)).isoformat()
        plan = (*PLAN, "--execution-time", when)
        possible = {
            "plan pra": ("plan", "pra", *plan),
            "plan prb": ("plan", "prb", *plan),
            "deploy": ("plan", "prod", *plan),
            "run prod": ("run", "prod", "--execution-time", when),
            "invalidate": ("invalidate", rng.choice(invalidatable), "--sync"),
            "janitor": ("janitor", "--ignore-ttl"),
        }
        others = [name for name in possible if name not in ("plan pra", "plan prb")]
        picked = set(rng.sample(others, rng.randint(3, len(others))))
        if index == ROUNDS - 1:
            picked |= set(others) - ran   # every kind of actor runs in some round
        ran |= picked
        chosen = ["plan pra", "plan prb"] + sorted(picked, key=list(possible).index)
        actors = [Actor(name.replace(" ", "_"), possible[name], delay=round(rng.uniform(0, 2.5), 1))
                  for name in chosen]
        if index == kill_round or KILL_EVERY_ROUND:
            victim = rng.choice(actors)
            if victim.name.startswith(("plan", "deploy", "run")) and rng.random() < 0.5:
                victim.kill = f"mid-backfill:{rng.randint(1, 3)}"
            elif victim.name == "janitor" and rng.random() < 0.5:
                victim.kill = "janitor-after-state"
            else:
                victim.kill = f"after {rng.uniform(4.0, 8.0):.1f}s"
        rounds.append(Round(index + 1, FACTORS[index + 1], SETUP_TIME + timedelta(days=index + 1), actors))
        invalidatable = ["pra", "prb"]   # stale is gone after round 1, or serves on
    return rounds


def test_many_actors_on_one_state_and_one_catalog(tmp_path, connect_server, state_database):
    url, schema = connect_server.url, f"chaos{uuid.uuid4().hex[:6]}"
    rng = random.Random(SEED)
    rounds = plan_rounds(rng)
    print(f"\nchaos seed {SEED} (MESHBOT_CHAOS_SEED or tests/test_chaos.py SEED to change), schema {schema}")
    reader, engine = Reader(url), state_engine(state_database)
    begun = time.monotonic()
    failures: list[str] = []
    try:
        base = write_project(tmp_path / "setup", schema, FACTORS[0], url, state_database)
        for env in ("prod", "stale"):
            done = meshbot(base, "plan", env, *PLAN, "--execution-time", SETUP_TIME.isoformat())
            assert done.returncode == 0, done.stdout + done.stderr
        print(f"setup: prod and stale at x{FACTORS[0]} ({time.monotonic() - begun:.1f}s)")
        last_root = base
        for chaos in rounds:
            roots = {actor.name: write_project(tmp_path / f"r{chaos.number}" / actor.name, schema, chaos.factor,
                                               url, state_database) for actor in chaos.actors}
            started = time.monotonic()
            run_actors(chaos.actors, roots, tmp_path / f"r{chaos.number}" / "logs")
            print(f"round {chaos.number}: x{chaos.factor} at {chaos.execution_time} "
                  f"({time.monotonic() - started:.1f}s)")
            for actor in chaos.actors:
                print(actor.summary() + ("  " + " ".join(actor.args[1:2]) if actor.name == "invalidate" else ""))
            last_root = roots[chaos.actors[0].name]
            problems = check_round(f"round {chaos.number}", reader, engine, schema, last_root, chaos.actors)
            for problem in problems:
                print("  PROBLEM " + problem.splitlines()[0])
            failures += [f"round {chaos.number}: {problem}" for problem in problems]

        # the repair pass: each live environment planned again, one after another, with the last project
        final = rounds[-1]
        live, _ = live_environments(list_environments(last_root))
        envs = sorted(set(live) | {"prod"})
        when = final.execution_time.isoformat()
        for env in envs:
            for attempt in (1, 2):
                done = meshbot(last_root, "plan", env, *PLAN, "--execution-time", when)
                print(f"repair: plan {env} (attempt {attempt}): exit {done.returncode}")
                if done.returncode == 0 or "plan again" not in done.stdout + done.stderr:
                    break
            if done.returncode != 0:
                failures.append(f"repair: plan {env} failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}")
        days = days_before(final.execution_time)
        served = reader.query({f"{env}.{model}": f"SELECT * FROM {view(schema, env, model)}"
                               for env in envs for model in MODELS})
        want = {"src": src_rows(), "events": events_rows(final.factor, days),
                "daily": daily_rows(final.factor, days)}
        for key, rows in sorted(served.items()):
            env, model = key.split(".")
            if rows != want[model]:
                failures.append(f"after repair, {env} serves the wrong {model}: "
                                f"{rows if isinstance(rows, str) else [r for r in rows if r not in want[model]][:6]}"
                                f" extra, {[] if isinstance(rows, str) else [r for r in want[model] if r not in rows][:6]}"
                                " missing")
        problems = check_round("after repair", reader, engine, schema, last_root, [])
        failures += [f"after repair: {problem}" for problem in problems]
        print(f"chaos seed {SEED}: {ROUNDS} rounds and the repair in {time.monotonic() - begun:.1f}s")
        assert not failures, f"seed {SEED}:\n" + "\n".join(failures)
    finally:
        reader.close()
        engine.dispose()
        names = [schema, f"sqlmesh__{schema}", *(f"{schema}__{env}" for env in ("pra", "prb", "stale"))]
        script = (f"from pyspark.sql import SparkSession; s = SparkSession.builder.remote({url!r})"
                  f".getOrCreate()\nfor n in {names!r}: s.sql(f'DROP DATABASE IF EXISTS `{{n}}` CASCADE')")
        subprocess.run([PYTHON, "-c", script], capture_output=True, timeout=300)
