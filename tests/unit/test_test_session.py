"""The test session itself keeps the global random state still (tests/conftest.py)."""

from __future__ import annotations

import random


def test_websocket_pings_do_not_move_the_global_random_state() -> None:
    """Prefect's events client pings its server every 20 s; websockets drew the payload from
    the global random state, which Hypothesis reads as a strategy using `random`."""
    from websockets.asyncio import connection

    before = random.getstate()
    connection.random.getrandbits(32)
    assert random.getstate() == before
