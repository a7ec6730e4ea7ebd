"""Pure helpers of the state package: interval folding, TTL parsing, chunking (with their doctests)."""

from __future__ import annotations

import doctest

import pytest

from bot.errors import StateError
from bot.state import _interval_math, _ttl, _util
from bot.state._interval_math import merge, replay, subtract
from bot.state._ttl import ttl_ms


@pytest.mark.parametrize("module", [_interval_math, _ttl, _util])
def test_doctests(module):
    assert doctest.testmod(module).failed == 0


def test_replay_applies_removals_in_order():
    records = [(0, 10, False), (20, 30, False), (5, 25, True), (22, 24, False), (0, 1, True)]
    assert replay(records) == [(1, 5), (22, 24), (25, 30)]


def test_merge_and_subtract_edges():
    assert merge([(3, 3), (1, 2), (2, 3)]) == [(1, 3)]
    assert subtract([(0, 10)], [(0, 10)]) == []
    assert subtract([(0, 10)], [(10, 20)]) == [(0, 10)]


@pytest.mark.parametrize("text, expected", [
    ("in 1 week", 7 * 86_400_000), ("1 day", 86_400_000), ("in 3 DAYS", 3 * 86_400_000),
    ("12 hours", 12 * 3_600_000), ("in 30 minutes", 1_800_000), ("in 1 month", 30 * 86_400_000),
])
def test_ttl_ms(text, expected):
    assert ttl_ms(text) == expected


def test_bad_ttl_names_the_value():
    with pytest.raises(StateError, match="cannot read the TTL 'soon'"):
        ttl_ms("soon")
