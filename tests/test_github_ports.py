"""bot.github.ports: the ports are kept: GithubClient and local mode's LocalOutput implement every GithubPort
operation, and Context, the timing wrapper and the tests' FakeEngine every EngineContext method, each with
the Protocol's parameters (names, kinds, defaults), so a runner works the same on any of them."""

from __future__ import annotations

import inspect
from functools import cached_property

import pytest

from bot.context import Context
from bot.github.ports import EngineContext, GithubPort
from bot.github.client import GithubClient
from bot.github.local import LocalOutput
from bot.github.timing import TimedContext
from github_support import FakeEngine


def _operations(port: type) -> list[str]:
    return sorted(name for name in vars(port) if not name.startswith("_"))


def _parameters(function) -> list[tuple[str, object, object]]:
    return [(p.name, p.kind, p.default) for p in list(inspect.signature(function).parameters.values())[1:]]


@pytest.mark.parametrize("port, implementation", [
    (GithubPort, GithubClient), (GithubPort, LocalOutput),
    (EngineContext, Context), (EngineContext, TimedContext), (EngineContext, FakeEngine),
], ids=lambda c: c.__name__)
def test_every_implementation_has_every_operation_of_its_port_with_the_same_parameters(port, implementation):
    assert len(_operations(port)) >= 14
    for name in _operations(port):
        wanted, given = inspect.getattr_static(port, name), inspect.getattr_static(implementation, name, None)
        assert given is not None, f"{implementation.__name__} lacks {port.__name__}.{name}"
        if isinstance(wanted, property):
            assert isinstance(given, (property, cached_property)), f"{implementation.__name__}.{name}: no property"
            continue
        assert _parameters(given) == _parameters(wanted), f"{implementation.__name__}.{name}"
