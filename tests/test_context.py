"""The engine's public API is typed: no `Any` in Context's or EngineContext's signatures; Context, the
bot's timing wrapper and the tests' FakeEngine satisfy EngineContext, and every GitHub port GithubPort."""

from __future__ import annotations

import ast
import importlib
import inspect
import sys
import typing
from functools import cached_property
from types import ModuleType
from typing import Any, Callable

import pytest

from bot.context import Context
from bot.github.ports import EngineContext, GithubPort
from bot.github.client import GithubClient
from bot.github.local import LocalOutput
from bot.github.timing import TimedContext, TimedGithub
from github_support import FakeEngine


def type_checking_names(module: ModuleType) -> dict[str, object]:
    """What a module imports under `if TYPE_CHECKING:`: its string annotations name these."""
    names: dict[str, object] = {}
    for node in ast.parse(inspect.getsource(module)).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module:
                    imported = importlib.import_module(statement.module)
                    names.update({a.asname or a.name: getattr(imported, a.name) for a in statement.names})
    return names


def public_members(cls: type) -> dict[str, Callable[..., object]]:
    """Public methods of `cls` and its bases, properties as their getters."""
    members: dict[str, Callable[..., object]] = {}
    namespace = {k: v for base in reversed(cls.__mro__) if base is not object for k, v in vars(base).items()}
    for name, value in namespace.items():
        if name.startswith("_"):
            continue
        if isinstance(value, cached_property):
            value = value.func
        elif isinstance(value, property):
            value = value.fget
        if callable(value):
            members[name] = value
    return members


def hints(member: Callable[..., object]) -> dict[str, object]:
    module = sys.modules[member.__module__]
    return typing.get_type_hints(member, globalns={**vars(module), **type_checking_names(module)})


def contains_any(hint: object) -> bool:
    if hint is Any:
        return True
    if isinstance(hint, (list, tuple)):          # Callable's parameter list
        return any(contains_any(item) for item in hint)
    return any(contains_any(arg) for arg in typing.get_args(hint))


def any_in_signatures(cls: type) -> list[str]:
    """`Class.method: parameter x is ...` for each parameter or return whose type is or contains Any."""
    found = []
    for name, member in public_members(cls).items():
        for slot, hint in hints(member).items():
            if contains_any(hint):
                where = "return" if slot == "return" else f"parameter `{slot}`"
                found.append(f"{cls.__name__}.{name}: {where} is {hint}")
    return found


@pytest.mark.parametrize("api", [Context, EngineContext], ids=lambda c: c.__name__)
def test_the_engine_public_api_carries_no_any(api):
    assert any_in_signatures(api) == []


class _Leaky:
    def rows(self, sql: str) -> list[dict[str, Any]]: ...
    def run(self, *, progress: Callable[[Any], None] | None = None) -> None: ...
    def fine(self, limit: int | None = None) -> tuple[str, ...]: ...


def test_the_guard_names_the_method_and_slot_that_carry_any():
    assert any_in_signatures(_Leaky) == [
        "_Leaky.rows: return is list[dict[str, typing.Any]]",
        "_Leaky.run: parameter `progress` is typing.Optional[typing.Callable[[typing.Any], NoneType]]"]


def mismatches(protocol: type, implementation: type) -> list[str]:
    """Members of `protocol` that `implementation` lacks or declares with other parameters or types."""
    provided = public_members(implementation)
    found = []
    for name, expected in public_members(protocol).items():
        actual = provided.get(name)
        if actual is None:
            found.append(f"{implementation.__name__} lacks {protocol.__name__}.{name}")
        elif hints(actual) != hints(expected) or \
                [(p.name, p.kind, p.default) for p in inspect.signature(actual).parameters.values()] != \
                [(p.name, p.kind, p.default) for p in inspect.signature(expected).parameters.values()]:
            found.append(f"{implementation.__name__}.{name} differs from {protocol.__name__}.{name}")
    return found


@pytest.mark.parametrize("implementation", [Context, TimedContext, FakeEngine], ids=lambda c: c.__name__)
def test_each_engine_context_has_the_protocols_methods_with_the_same_signature(implementation):
    assert mismatches(EngineContext, implementation) == []


@pytest.mark.parametrize("implementation", [GithubClient, LocalOutput, TimedGithub], ids=lambda c: c.__name__)
def test_each_github_port_has_the_protocols_methods_with_the_same_signature(implementation):
    assert mismatches(GithubPort, implementation) == []


def test_a_signature_that_drifts_from_the_protocol_is_named():
    class Drifted(FakeEngine):
        def view_name(self, model: str, environment: str) -> str:   # parameter renamed
            return model

    assert mismatches(EngineContext, Drifted) == ["Drifted.view_name differs from EngineContext.view_name"]
