"""A store's standing disputes, carried with its records when the store moves.

A reviewer's dispute keeps its record from any delete until someone resolves it (README,
review). It lives in the review queue, not on the record, so a store moved with records
only lost it, and the new store's night deleted the record at its deadline. ``memlife
export --erasures FILE`` writes each disputed item as a line of kind ``dispute`` beside the
erasures (ids, the reason, the reviewer and the times; never content), and ``memlife
import --erasures FILE`` disputes the same finding again in the new store: a record found
in the same actor and namespace gets the finding's item (the id its nights look it up by),
disputed by the same reviewer; an item the
new store resolved already keeps that answer; a second import changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memlife.stores.base import MemoryStore

SHA256 = r"^[0-9a-f]{64}$"


class Dispute(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["dispute"]
    item_id: str = Field(pattern=r"^rv-[0-9a-f]{16}$")
    record_id: str = Field(min_length=1, max_length=256)
    actor_id: str = Field(min_length=1, max_length=256)
    namespace: str = Field(min_length=1, max_length=1024)
    reason: str = Field(pattern=r"^[A-Z_]{1,64}$")  # the finding the reviewer disputed
    reviewer: str = Field(min_length=1)  # as `review resolve --reviewer` took it
    opened_at: datetime
    content_sha256: str | None = Field(None, pattern=SHA256)  # the text it was about

    @field_validator("reason")
    @classmethod
    def _a_finding(cls, value: str) -> str:
        # an item under a reason no night makes is never found again (audit 49b)
        from memlife.plan import REVIEW_REASONS

        if value not in {r.value for r in REVIEW_REASONS}:
            raise ValueError("not a review reason")
        return value


def dump_disputes(store: MemoryStore) -> Iterator[str]:
    """The store's disputed review items, one JSON line each (none when it has no queue)."""
    for i in _queue(store, create=False).backend.list(("disputed",)):
        yield Dispute(
            kind="dispute", item_id=i.item_id, record_id=i.record_id, actor_id=i.actor_id,
            namespace=i.namespace, reason=i.reason, reviewer=i.reviewer or "unknown",
            opened_at=i.opened_at, content_sha256=i.content_sha256,
        ).model_dump_json()  # fmt: skip


def count_disputes(store: MemoryStore) -> int:
    return len(_queue(store, create=False).backend.list(("disputed",)))


def carry_disputes(
    store: MemoryStore, disputes: Sequence[Dispute], *, now: datetime
) -> dict[str, list[str]]:
    """Dispute each item again here (see the module doc): ids carried, already disputed
    here, resolved here (that answer stands) and not found (no such record in its scope)."""
    from memlife.review_queue.base import ReviewItem, item_id

    queue = _queue(store, create=True)
    out: dict[str, list[str]] = {"carried": [], "already": [], "resolved_here": [],
                                 "not_found": []}  # fmt: skip
    at = now.isoformat()
    for d in disputes:
        r = store.get(d.record_id)
        if r is None or (r.actor_id, r.namespace) != (d.actor_id, d.namespace):
            out["not_found"].append(d.record_id)
            continue
        # filed under the id this store's nights look the finding up by, never the line's:
        # that id may have followed an item answered in the old store (content_item_id),
        # which this store, holding no resolved items, never reaches (a second item, the
        # dispute unseen by a delete through it; audit 49b), or be another record's
        # (an edited line: audit 47m)
        iid = item_id(r.id, d.reason, r.actor_id, r.namespace)
        here = queue.get(iid)
        if here is not None and here.state in ("disputed", "resolved"):
            out["already" if here.state == "disputed" else "resolved_here"].append(iid)
            continue
        if here is None:  # opened as the old store opened it, then disputed as it was
            opened = ReviewItem(
                item_id=iid, record_id=r.id, reason=d.reason, pair_id=None,
                actor_id=r.actor_id, namespace=r.namespace, memory_type=r.memory_type.value,
                owner=r.owner, priority=0.0, state="open", decision=None, reviewer=None,
                nights=1, opened_run="import", opened_at=d.opened_at.isoformat(),
                last_seen_run="import", last_seen_at=at, resolved_at=None, operation_id=None,
                content_sha256=d.content_sha256, first_seen_at=d.opened_at.isoformat(),
            )  # fmt: skip
            queue.backend.write_night([], [opened], "import", at)
        if queue.close(iid, state="disputed", decision="dispute", reviewer=d.reviewer,
                       at=now, operation_id=None):  # fmt: skip
            out["carried"].append(iid)
        else:  # resolved by a reviewer here meanwhile: that answer stands
            out["resolved_here"].append(iid)
    return out


def _queue(store: MemoryStore, *, create: bool) -> Any:
    from memlife.review_queue.queue import ReviewQueue

    return ReviewQueue.for_store(store, create=create)
