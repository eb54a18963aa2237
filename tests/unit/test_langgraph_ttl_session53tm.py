"""Audit 53tm (session 53: time as the calendar and the clock attack it): a LangGraph
``PutOp``'s ``ttl`` (minutes) past the calendar.

``MemlifeStore._put`` worked the item's deadline out as ``utcnow() + timedelta(minutes=ttl)``
with no bound: a TTL of ten thousand years (``10**12`` minutes, or ``5 * 10**9``), an
infinite one, or a hugely negative one raised a bare ``OverflowError`` ("date value out of
range", "cannot convert float infinity to integer"), and ``nan`` a bare ``ValueError``
("cannot convert float NaN to integer"), out of the agent's ``batch`` naming no item and
no field. Every other deadline memlife works out clamps at the calendar's last instant
(``model.days_after``, audit 50f). The real SQLite store under the real adapter.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("langgraph.store.base")

from langgraph.store.base import PutOp  # noqa: E402

from memlife import Memory  # noqa: E402
from memlife.errors import InputError  # noqa: E402
from memlife.integrations.langgraph import MemlifeStore, record_id  # noqa: E402
from memlife.model import LATEST  # noqa: E402

NS = ("users", "u1", "facts")
PATH = "/users/u1/facts"


@pytest.fixture(name="lg")
def _lg(home: Path) -> Iterator[MemlifeStore]:
    store = MemlifeStore(Memory(f"sqlite:///{home / 'memlife.db'}", ledger=home / "ledger"))
    yield store
    store.memory.close()


@pytest.mark.parametrize("ttl", [10**12, 5 * 10**9, 1e300, float("inf")])
def test_a_ttl_past_the_calendar_is_the_calendars_last_instant(
    lg: MemlifeStore, ttl: float
) -> None:
    """A TTL reaching past year 9999 is a deadline no clock reaches: the item is stored with
    the calendar's last instant, as a statement dated 9999 gets (audit 50f), and served."""
    lg.batch([PutOp(NS, "far", {"content": "Parked on level 3."}, ttl=ttl)])
    stored = lg.store.get(record_id("u1", PATH, "far"))
    assert stored is not None and stored.expires_at == LATEST
    item = lg.get(NS, "far")
    assert item is not None and item.value == {"content": "Parked on level 3."}


def test_a_ttl_far_below_zero_is_a_deadline_already_gone(lg: MemlifeStore) -> None:
    """As ``ttl=-1`` (session 35c): stored, never served."""
    lg.batch([PutOp(NS, "gone", {"content": "The gate code is 4512."}, ttl=-(10**12))])
    assert lg.store.get(record_id("u1", PATH, "gone")) is not None
    assert lg.get(NS, "gone") is None


def test_a_ttl_that_is_no_number_is_refused_naming_the_item_and_field(lg: MemlifeStore) -> None:
    with pytest.raises(InputError, match=r"item 'k'.*ttl"):
        lg.batch([PutOp(NS, "k", {"content": "Likes green tea."}, ttl=float("nan"))])
    assert lg.store.get(record_id("u1", PATH, "k")) is None  # nothing written


def test_control_an_ordinary_ttl_and_a_gone_one_behave_as_before(lg: MemlifeStore) -> None:
    lg.batch([PutOp(NS, "short", {"content": "Parked on level 2."}, ttl=30)])
    lg.batch([PutOp(NS, "past", {"content": "The door code is 1234."}, ttl=-1)])
    stored = lg.store.get(record_id("u1", PATH, "short"))
    assert stored is not None and stored.expires_at is not None and stored.expires_at < LATEST
    assert lg.get(NS, "short") is not None
    assert lg.get(NS, "past") is None
