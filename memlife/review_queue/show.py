"""What a reviewer reads before deciding (`memlife review show`), and the checks of `review
list`'s filters.

``show`` returns one item with the text of the records it asks about: the record and, for a
pair item, the newer record that probably replaces it. Content is for the terminal operator
only (the CLI prints library messages as they are); it is never written anywhere: nothing
here writes to the queue, the store or a receipt.
"""

from __future__ import annotations

from typing import Any

from memlife.plan import REVIEW_REASONS
from memlife.review_queue import ReviewError, ReviewItem, ReviewItemNotFound, ReviewQueue
from memlife.review_queue.seen import seen_token

REASON_CODES = tuple(sorted(r.value for r in REVIEW_REASONS))


def review_reason(code: str) -> str:
    """``code`` as the review reason it names, in any case (``possible_update`` is
    POSSIBLE_UPDATE); a code that is no review reason is refused, naming the valid ones (a
    filter on it would match nothing, and "0 review items" reads as an empty queue)."""
    upper = code.strip().upper()
    if upper not in REASON_CODES:
        raise ReviewError(f"--reason {code!r} is no review reason: use {', '.join(REASON_CODES)}")
    return upper


def show(store: Any, iid: str) -> dict[str, Any]:
    """The item's fields, and its record (and its pair's) with content and dates; None for
    a record that no longer exists in the item's actor and namespace."""
    item = ReviewQueue.for_store(store, create=False).get(iid)  # a read: creates nothing
    if item is None:
        raise ReviewItemNotFound(f"review item {iid}: not found")
    return {
        "item": item.as_json(),
        "record": _record(store, item, item.record_id),
        "pair": _record(store, item, item.pair_id) if item.pair_id else None,
        "seen": seen_token(store, item),
    }


def _record(store: Any, item: ReviewItem, record_id: str) -> dict[str, Any] | None:
    r = store.get(record_id)
    if r is None or (r.actor_id, r.namespace) != (item.actor_id, item.namespace):
        # gone, or the id was freed and taken by another actor or namespace: not this
        # item's record (invariant 8), so nothing of it is shown
        return None
    return {
        "id": r.id,
        "memory_type": r.memory_type.value,
        "status": r.status.value,
        "created_at": r.created_at.isoformat(),
        "expires_at": r.expires_at.isoformat() if r.expires_at else None,
        "last_verified_at": r.last_verified_at.isoformat() if r.last_verified_at else None,
        "replaced_by": r.provenance.replaced_by,
        # the item is about the content it was opened on: a changed record is asked anew
        "changed_since_opened": (
            item.content_sha256 is not None
            and record_id == item.record_id
            and r.sha256 != item.content_sha256
        ),
        "content": r.content,
    }
