"""The review item and the persistence protocol of the review queue (one backend per file:
sqlite.py beside the store, dynamodb.py in the state table)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, Protocol

OPEN_STATES = ("open", "disputed")
# a finding the nightly budget had no room for, kept by name (up to the policy's
# ``waiting_listed``) with the time it was first found: it ages into a later night's budget
WAITING = "waiting"
# a reviewer's decisions: an item resolved with one answers its finding for the content (and
# pair) it was about. memlife's own closings (answered_earlier, deleted, superseded, erased)
# answer nothing: should the finding come back, it is asked again.
ANSWERS = frozenset({"keep", "verify", "supersede", "delete"})


@dataclass
class ReviewItem:
    item_id: str
    record_id: str
    reason: str
    pair_id: str | None
    actor_id: str
    namespace: str
    memory_type: str | None
    owner: str | None
    priority: float
    state: str  # open | disputed | resolved | waiting
    decision: str | None
    reviewer: str | None
    nights: int
    opened_run: str
    opened_at: str
    last_seen_run: str
    last_seen_at: str
    resolved_at: str | None
    operation_id: str | None
    # the record's content hash the finding is about: set when the item is opened, refreshed
    # when a later night carries it for the same content, renewed when the content changed
    # (RENEWED below). None: an item opened before hashes were kept ("unknown"; see resolve).
    content_sha256: str | None = None
    # when a night first found this finding (it may have waited before it opened); None on
    # items opened before it was kept
    first_seen_at: str | None = None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


COLUMNS = tuple(f.name for f in fields(ReviewItem))
# what a night changes on an open (or disputed) item whose record's content changed since it
# was opened: the item is about the new content from now on, a new finding (nights from 1);
# state, decision and reviewer stay (a disputed record stays protected)
RENEWED = ("pair_id", "owner", "memory_type", "priority", "nights", "opened_run", "opened_at",
           "last_seen_run", "last_seen_at", "content_sha256")  # fmt: skip
# (item id, the record's content hash this night; None where unknown)
Carried = tuple[str, str | None]
# (the content hash the item holds now, the item as renewed for the new content)
Renewal = tuple[str, ReviewItem]


def item_id(record_id: str, reason: str, actor_id: str, namespace: str) -> str:
    """One finding: (actor, namespace, record, reason). Record ids are not unique across
    actors (an id an erasure freed can be taken by another actor), so the scope is part
    of the key: another actor's record never continues, renews or closes this item."""
    key = f"{actor_id}\x1f{namespace}\x1f{record_id}\x1f{reason}"
    return "rv-" + hashlib.sha256(key.encode()).hexdigest()[:16]


def content_item_id(iid: str, resolved_sha256: str) -> str:
    """The item that follows item ``iid``, which a reviewer resolved for content
    ``resolved_sha256``, once the record holds other content: that decision was about that
    content, so the finding is asked anew, under this id (a resolved item never changes: it
    stays the record of its decision). Open, it is carried and renewed as any item."""
    return "rv-" + hashlib.sha256(f"{iid}\x1f{resolved_sha256}".encode()).hexdigest()[:16]


def legacy_item_id(record_id: str, reason: str) -> str:
    """The id items had before the scope was part of it (record, reason): such an item is
    carried on under it, but only for a record of the item's own actor and namespace."""
    return "rv-" + hashlib.sha256(f"{record_id}\x1f{reason}".encode()).hexdigest()[:16]


def sort_key(item: ReviewItem) -> tuple[float, str, str]:
    """Highest priority first, then oldest, then id: the order `review list` shows."""
    return (-item.priority, item.opened_at, item.item_id)


class ReviewBackend(Protocol):
    """Where review items persist. Every write is conditional on the state it expects, so a
    rerun of the same night, or two processes at once, count nothing twice."""

    def get_many(self, ids: Sequence[str]) -> dict[str, ReviewItem]: ...

    def list(self, states: Iterable[str]) -> list[ReviewItem]:
        """Items in these states (unsorted; the queue filters and sorts)."""
        ...

    def disputed(self, actor_id: str, namespace: str) -> frozenset[str]:
        """Record ids with a disputed item in this actor/namespace."""
        ...

    def write_night(self, carried: Sequence[Carried], opened: Sequence[ReviewItem], run_id: str,
                    at: str, renewed: Sequence[Renewal] = (),
                    moved: Sequence[ReviewItem] = (), dropped: Sequence[str] = ()) -> None:  # fmt: skip
        """Carried items: nights + 1 once per run (not when last seen by ``run_id``), and the
        content hash recorded where the item had none.
        Opened items (open, or waiting: listed by name): inserted unless the id exists (an
        insert never overwrites).
        Renewed items (the record's content changed): the RENEWED fields set, only while the
        item is not resolved and still holds the old hash (a rerun changes nothing twice).
        Moved items: an item that waits set whole to the given one (opened tonight, or first
        seen again for other content), only while it still waits (a rerun moves it once).
        Dropped ids: items removed while they wait (the night's list has no room for them)."""
        ...

    def close(self, iid: str, *, state: str, decision: str, reviewer: str,
              resolved_at: str | None, operation_id: str | None) -> bool:  # fmt: skip
        """Set a decision on an item that is not resolved yet; False if there is none such."""
        ...
