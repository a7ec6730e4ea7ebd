"""Pure helpers of the state package: interval folding, chunking (with their doctests)."""

from __future__ import annotations

import doctest

import pytest

from bot.state import _util
from bot.timeline import intervals as _interval_math
from bot.timeline.intervals import merge, replay, subtract


@pytest.mark.parametrize("module", [_interval_math, _util])
def test_doctests(module):
    assert doctest.testmod(module).failed == 0


def test_replay_applies_removals_in_order():
    records = [(0, 10, False), (20, 30, False), (5, 25, True), (22, 24, False), (0, 1, True)]
    assert replay(records) == [(1, 5), (22, 24), (25, 30)]


def test_merge_and_subtract_edges():
    assert merge([(3, 3), (1, 2), (2, 3)]) == [(1, 3)]
    assert subtract([(0, 10)], [(0, 10)]) == []
    assert subtract([(0, 10)], [(10, 20)]) == [(0, 10)]
