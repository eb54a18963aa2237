"""A reviewer's decisions on a review item, and the errors a resolve request can meet."""

from __future__ import annotations

from enum import StrEnum

from memlife.errors import InputError, NotFoundError


class ReviewDecision(StrEnum):
    keep = "keep"
    verify = "verify"
    supersede = "supersede"
    delete = "delete"
    dispute = "dispute"


class ReviewError(InputError):
    """A resolve request that cannot be carried out; the message names the item and why."""


class ReviewItemNotFound(ReviewError, NotFoundError):
    """No review item has this id (exit 1, as any "not found")."""


class ReplacementNotFound(ReviewError, NotFoundError):
    """``supersede --by ID`` where no record has that id (exit 1, as any "not found"); a
    record that exists but is not active is a ReviewError (exit 2)."""


# decisions that act on the record's content as reviewed: they need the record to hold the
# content the item was opened on (keep and dispute change no record and always proceed)
ACTS_ON_CONTENT = frozenset({"verify", "supersede", "delete"})
