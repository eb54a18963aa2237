"""Review as a workflow: items that persist across nights until a reviewer resolves them.

An item is keyed by (actor, namespace, record, reason), so the same finding on the next
night updates the open item (``nights`` + 1, last seen) instead of queueing it again; if
the record's content changed since the item was opened, the item is renewed for the new
content (nights from 1). A POSSIBLE_UPDATE item is a *pair*: the older record and
``pair_id``, the newer one that probably replaces it; another newer record is another
finding, so it renews an open item (the pair it names is tonight's) and asks again after a
resolved one, as changed content does.
New items are opened by priority (plan.Planner.priority: type, sensitivity, confidence,
access) up to the policy's nightly budget; what does not fit waits and is counted.

Resolving (``memlife review resolve``) is a manual run: journaled, applied, receipted with
the reviewer's identity, plus a run manifest and receipt:

    keep      nothing changes; the item is closed: this finding is answered for this
              content (a later content, or another pair, is asked again, under a new item)
    verify    last_verified_at = now (the record was checked against its source)
    supersede the record is superseded by the pair's newer record (or ``--by`` ID)
    delete    the record is deleted (never a legal hold)
    dispute   the item stays unresolved as *disputed*: the record is never deleted
              (the planner turns any delete into retain + DISPUTED) until resolved

Each item holds the content hash of the record it was opened on. verify, supersede and
delete act on that content only: refused when the record changed since (a later night renews
the item for the new content), or when the item predates hashes (unknown until the next
night records it). keep and dispute change no record and are never refused for that.

Items live in the store's SQLite file (sqlite.py), else, with ``MEMLIFE_STATE=dynamodb://…``,
in the state table (dynamodb.py), else in ``$MEMLIFE_HOME/reviews.db``. Items hold ids,
codes, numbers and content hashes, never content.
"""

from __future__ import annotations

from memlife.review_queue.base import COLUMNS, ReviewBackend, ReviewItem, item_id, legacy_item_id
from memlife.review_queue.candidates import ReviewCandidates
from memlife.review_queue.decisions import (
    ReplacementNotFound,
    ReviewDecision,
    ReviewError,
    ReviewItemNotFound,
)
from memlife.review_queue.queue import ReviewQueue, open_backend
from memlife.review_queue.resolving import resolve

__all__ = [
    "COLUMNS",
    "ReviewBackend",
    "ReviewCandidates",
    "ReviewDecision",
    "ReplacementNotFound",
    "ReviewError",
    "ReviewItem",
    "ReviewItemNotFound",
    "ReviewQueue",
    "item_id",
    "legacy_item_id",
    "open_backend",
    "resolve",
]
