"""Hostile project files are refused before they cost time or memory: YAML alias bombs and oversized files,
each with an error naming the file and the limit."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.errors import BotError, ConfigError
from bot.project.config import load_config
from bot.project.loader import load_project
from tests.project_files import write_files

CONFIG = "model_defaults: {dialect: spark, start: '2024-01-01'}\n"
MODEL = "MODEL (name shop.items, kind FULL);\n\nSELECT 1 AS id\n"


def alias_bomb(key: str = "bomb", levels: int = 6) -> str:
    """`key` holding 10**levels scalars written as `levels` lines of ten aliases each (~400 bytes)."""
    lines = [f"{key}_0: &{key}_0 [{', '.join(['lol'] * 10)}]"]
    lines += [f"{key}_{n}: &{key}_{n} [{', '.join([f'*{key}_{n - 1}'] * 10)}]" for n in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_in_config_yaml_is_refused_naming_the_alias_line(tmp_path):
    bomb = "variables:\n" + "".join(f"  {line}\n" for line in alias_bomb().splitlines())
    write_files(tmp_path, {"config.yaml": CONFIG + bomb})
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    message = str(info.value)
    # lines 3-8 are the six levels: the fifth (10**5 repeated nodes) passes the budget of 100,000 + 20 per node
    assert message.startswith(f"{tmp_path / 'config.yaml'}:7:"), message
    assert "YAML aliases repeat too many nodes" in message and "limit of 100,000 plus 20 per node written" in message


@pytest.mark.parametrize("name, text", [
    ("external_models.yaml", "- name: shop.raw\n  columns: {id: int}\n"
                             + "".join(f"  {line}\n" for line in alias_bomb("rows").splitlines())),
    ("tests/test_items.yaml", "test_items:\n  model: shop.items\n  outputs: {query: [{id: 1}]}\n" + alias_bomb("rows")),
])
def test_an_alias_bomb_in_other_project_yaml_is_refused(tmp_path, name, text):
    write_files(tmp_path, {"config.yaml": CONFIG, "models/items.sql": MODEL, name: text})
    with pytest.raises(ConfigError, match=rf"{name}:\d+:\d+: YAML aliases repeat too many nodes"):
        load_project(tmp_path, use_cache=False)


def test_an_alias_bomb_in_the_default_branch_config_is_refused():
    from bot.github.trusted import read_trusted_config

    class Files:
        branch = "main"

        def read(self, relative: str) -> str | None:
            return "cicd_bot:\n  enable_deploy_command: true\n" + alias_bomb() if relative == "config.yaml" else None

    with pytest.raises(BotError, match=r"config.yaml on the default branch `main`: line 7: YAML aliases repeat"):
        read_trusted_config(input_text=None, default_branch=Files())


def test_anchors_and_merge_keys_used_as_real_projects_do_still_load(tmp_path):
    write_files(tmp_path, {"config.yaml": CONFIG + """\
gateways:
  local: &local
    connection: &spark {type: spark, master: 'local[2]', config: {spark.sql.shuffle.partitions: 4}}
    state_connection: {type: sqlite, database: .meshbot/state.db}
  ci:
    <<: *local
    test_connection: *spark
    state_connection: {type: sqlite, database: .meshbot/ci.db}
"""})
    ci = load_config(tmp_path).gateways["ci"]
    assert ci.connection.master == "local[2]" and dict(ci.connection.config) == {"spark.sql.shuffle.partitions": "4"}
    assert ci.test_connection == ci.connection and str(ci.state_connection.database).endswith(".meshbot/ci.db")


def test_a_value_containing_itself_is_refused(tmp_path):
    write_files(tmp_path, {"config.yaml": CONFIG + "variables: &v {self: *v}\n"})
    with pytest.raises(ConfigError, match=r"config.yaml:2:\d+: the alias `\*v` is inside the value it names"):
        load_config(tmp_path)


def _padded(text: str, comment: str, size: int) -> str:
    """`text` and a comment making it `size` bytes."""
    return text + comment + "x" * (size - len(text) - len(comment) - 1) + "\n"


MB = 1 << 20
OVERSIZED = {   # file -> its text of 1.5 MB (a comment pads it) and the limit it is over
    "config.yaml": (_padded(CONFIG, "# ", MB * 3 // 2), "MESHBOT_MAX_FILE_MB"),
    "models/items.sql": (_padded(MODEL, "-- ", MB * 3 // 2), "MESHBOT_MAX_FILE_MB"),
    "models/py_items.py": (_padded("", "# ", MB * 3 // 2), "MESHBOT_MAX_FILE_MB"),
    "macros/big.sql": (_padded("", "{# ", MB * 3 // 2 - 3) + "#}", "MESHBOT_MAX_FILE_MB"),
    "tests/test_items.yaml": (_padded("", "# ", MB * 3 // 2), "MESHBOT_MAX_FILE_MB"),
    "seeds/items.csv": ("id\n" + "1\n" * (MB * 3 // 4), "MESHBOT_MAX_SEED_MB"),
}


@pytest.mark.parametrize("name", OVERSIZED)
def test_a_file_over_its_size_limit_is_refused_naming_file_size_and_limit(tmp_path, monkeypatch, name):
    text, variable = OVERSIZED[name]
    files = {"config.yaml": CONFIG, "models/items.sql": MODEL,
             "models/seed_items.sql": "MODEL (name shop.seed_items, kind SEED (path '../seeds/items.csv'));\n",
             "seeds/items.csv": "id\n1\n"}
    write_files(tmp_path, {**files, name: text})
    monkeypatch.setenv(variable, "1")
    with pytest.raises(ConfigError) as info:
        load_project(tmp_path, use_cache=False)
    assert str(info.value) == (f"{tmp_path / name}: the file has {len(text):,} bytes (1.5 MB), over meshbot's 1 MB "
                               f"limit for a {'seed' if 'SEED' in variable else 'project'} file; "
                               f"set {variable} to a larger number of MB to read it")
    monkeypatch.setenv(variable, "2")
    assert load_project(tmp_path, use_cache=False).models


def test_a_size_limit_that_is_not_a_number_is_refused(tmp_path, monkeypatch):
    write_files(tmp_path, {"config.yaml": CONFIG})
    monkeypatch.setenv("MESHBOT_MAX_FILE_MB", "10MB")
    with pytest.raises(ConfigError, match=r"MESHBOT_MAX_FILE_MB must be a whole number of MB \(at least 1\), "
                                          r"not '10MB'"):
        load_config(tmp_path)


def test_an_oversized_default_branch_config_is_refused_before_git_reads_it(tmp_path, monkeypatch):
    import subprocess

    from bot.github.checkout import GitCheckout
    from bot.github.trusted import GitDefaultBranch, read_trusted_config

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    (tmp_path / "config.yaml").write_text(_padded("cicd_bot: {}\n", "# ", MB * 3 // 2))
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "big")
    git("update-ref", "refs/remotes/origin/main", "HEAD")
    monkeypatch.setenv("MESHBOT_MAX_FILE_MB", "1")
    with pytest.raises(ConfigError, match=r"config.yaml on the default branch `main`: the file has 1,572,864 bytes"):
        read_trusted_config(input_text=None, default_branch=GitDefaultBranch(GitCheckout(tmp_path), "main"))
