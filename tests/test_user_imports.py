"""User files (Python models, macros, config.py) imported from several threads at once each see
meshbot's `sqlmesh` stand-in for their whole import, as concurrent backfill tasks do."""

from __future__ import annotations

import threading
import time

from bot.project.sqlmesh_shim import sqlmesh_shim


def test_one_threads_shim_is_not_taken_away_from_another_mid_import():
    first_inside, first_left = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def first() -> None:
        with sqlmesh_shim():
            first_inside.set()
            time.sleep(0.3)   # the second thread tries to start its import meanwhile
        first_left.set()

    def second() -> None:
        first_inside.wait(5)
        try:
            with sqlmesh_shim():
                first_left.wait(5)   # the first import has ended; this one has not
                import sqlmesh
                assert sqlmesh.model is not None
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert errors == []
