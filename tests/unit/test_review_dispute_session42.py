"""Forty-second audit a: a record disputed in one review item, answered through another.

A dispute protects its record: "never deleted until the dispute is resolved" (README,
review_queue/__init__.py). Session 41 refused a delete through another item of a disputed
record (test_review_dispute_session41.py). A supersede through another item still closes
every other item of the record as resolved, the dispute included; the record then goes
with its replacement's delete (resolving.py::_followers reads only disputed items)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife import state as state_mod
from memlife.plan import Reason
from memlife.review_queue import ReviewError, ReviewQueue, item_id, resolve
from memlife.review_queue.dynamodb import DynamoReviews
from memlife.review_queue.sqlite import SqliteReviews
from memlife.stores.sqlite import SqliteStore
from tests.support.aws_state import CREDENTIALS, provision, state_url
from tests.unit.test_guards_session35 import NS, POLICY, T0, finding, rec


@pytest.fixture(params=["sqlite", "dynamodb"])
def backend(request, home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A SQLite store (items in its file), or an AgentCore store (the fake, moto) with
    its review items in a DynamoDB state table (moto)."""
    if request.param == "sqlite":
        monkeypatch.setenv("MEMLIFE_STATE", "local")
        s = SqliteStore(home / "memlife.db")
        yield s
        s.close()
        return
    from tests.fakes.agentcore import agentcore_store

    for k, v in CREDENTIALS.items():
        monkeypatch.setenv(k, v)
    with agentcore_store() as (s, _fake):
        url = state_url()
        monkeypatch.setenv("MEMLIFE_STATE", url)
        monkeypatch.setattr(state_mod, "_open", {url: provision(url)})
        yield s


def test_a_supersede_through_another_item_leaves_the_dispute_standing(
    backend: Any, home: Path
) -> None:
    """ana disputes m-1 (its MISSING_OWNER item). The adversary, eve, may not delete it
    through its STALE_VERIFICATION item (session 41), so she supersedes it by m-2 there,
    then deletes m-2 through m-2's own item: m-1 would go with its replacement. Must hold:
    eve's answer to another item leaves ana's dispute standing, so the delete of m-2 is
    refused (it would take the disputed m-1) and m-1 is still there."""
    m1, m2 = rec("m-1"), rec("m-2", "Lives in Porto.")
    backend.put_many([m1, m2])
    m1, m2 = backend.get("m-1"), backend.get("m-2")  # as the store keeps them (their hash)
    queue = ReviewQueue.for_store(backend)
    assert isinstance(queue.backend, SqliteReviews | DynamoReviews)
    queue.queue([finding(m1, Reason.MISSING_OWNER), finding(m1, Reason.STALE_VERIFICATION),
                 finding(m2)], budget=10, run_id="night-1", at=T0)  # fmt: skip
    disputed = item_id("m-1", "MISSING_OWNER", "u-1", NS)
    kw: dict[str, Any] = {"policy": POLICY, "receipts": f"file://{home}/receipts"}
    resolve(backend, disputed, "dispute", "ana@example.com", now=T0 + timedelta(hours=1), **kw)
    resolve(backend, item_id("m-1", "STALE_VERIFICATION", "u-1", NS), "supersede",
            "eve@example.com", by="m-2", now=T0 + timedelta(hours=2), **kw)  # fmt: skip
    assert queue.get(disputed).state == "disputed"  # type: ignore[union-attr]
    with pytest.raises(ReviewError, match="disputed"):
        resolve(backend, item_id("m-2", "MISSING_OWNER", "u-1", NS), "delete",
                "eve@example.com", now=T0 + timedelta(hours=3), **kw)  # fmt: skip
    assert backend.get("m-1") is not None
