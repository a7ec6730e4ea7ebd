"""bot.github.seal: the project stays sealed until the event is authorized, then loads once, as the runner asked."""

from __future__ import annotations

import pytest

from bot.errors import GithubError
from bot.github.seal import SealedContext


def test_a_project_read_before_authorization_is_an_error_and_loads_nothing():
    loads = []
    sealed = SealedContext(lambda read_cache, fresh: loads.append((read_cache, fresh)))
    with pytest.raises(GithubError, match=r"read the project \(`config`\) before the event was authorized"):
        sealed.config
    assert loads == []


def test_unsealed_the_project_loads_once_with_the_runners_cache_choice():
    loads = []

    class Project:
        config = "the config"

    def factory(read_cache, fresh_files):
        loads.append((read_cache, fresh_files))
        return Project()

    sealed = SealedContext(factory)
    sealed.unseal(read_cache=False, fresh_files=frozenset({"models/a.sql"}))
    assert (sealed.config, sealed.config) == ("the config", "the config")
    assert loads == [(False, frozenset({"models/a.sql"}))]
