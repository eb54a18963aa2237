"""Inferred subjects, stored as inferred: a side table beside the store, never the record.

A record whose ``subject`` a person (or the importing system) gave keeps it; a record
without one gets a key from :func:`memlife.group.infer_subjects` at ``remember`` time or
in the nightly run, kept here so it never moves between nights. Because the record's own
``subject`` stays empty, a subject given later by a person simply wins.

The key is made of a few content words (for the reviewer) and a short hash: erasure and
every deletion call :meth:`InferredSubjects.forget_removed` with the removed ids, which
also takes the key off the other records grouped under it.

The table lives in the store's SQLite file (one backup, one erasure covers both; sqlite.py),
else, with ``MEMLIFE_STATE=dynamodb://…``, in the state table (dynamodb.py), else in
``$MEMLIFE_HOME/inferred.db``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Protocol

from memlife.model import PlanView, Status

Shard = tuple[str, str]  # (actor_id, namespace)


class SubjectTable(Protocol):
    """One backend per file. Keys never move: an existing key is never overwritten.

    A key belongs to its record's shard. Ids are reused once a record is removed, so a
    key another actor's (or namespace's) record left under the id is never returned, and a
    new record there takes the row over: keys hold content words, tenants never meet."""

    def get(self, shard: Shard, ids: Sequence[str]) -> dict[str, str]: ...

    def put(self, actor_id: str, namespace: str, subjects: Mapping[str, str], how: str) -> None:
        """Insert new keys (``how``: 'nightly' or 'remember'); existing ones of the same
        shard stay as they are, another shard's are replaced."""
        ...

    def forget(self, ids: Sequence[str], shard: Shard | None = None) -> int:
        """Delete the keys of these records (only ``shard``'s rows when given: another
        shard's record may have taken an id since); returns how many there were."""
        ...

    def forget_keys(self, shard: Shard, keys: Collection[str]) -> int:
        """Delete every row of ``shard`` holding one of ``keys``; returns how many."""
        ...


class InferredSubjects:
    """The inferred-subject table of a store, whichever backend holds it."""

    def __init__(self, backend: SubjectTable) -> None:
        self.backend = backend

    @classmethod
    def for_store(cls, store: object, *, create: bool = True) -> InferredSubjects:
        """The store's SQLite file; else the state table of $MEMLIFE_STATE; else a file under
        $MEMLIFE_HOME. ``create=False`` (a dry run) creates nothing."""
        from memlife.state import uses_remote_state

        remote = uses_remote_state(store)
        if remote is not None:
            from memlife.inferred.dynamodb import DynamoSubjects

            return cls(DynamoSubjects(remote))
        from memlife.inferred.sqlite import FILENAME, SCHEMA, TABLE, SqliteSubjects
        from memlife.state.local import side_connection

        return cls(SqliteSubjects(*side_connection(store, FILENAME, SCHEMA, TABLE, create=create)))

    def get(self, shard: Shard, ids: Sequence[str]) -> dict[str, str]:
        """Keys of these records kept for this shard (a row another shard left is not one)."""
        return self.backend.get(shard, ids) if ids else {}

    def put(self, actor_id: str, namespace: str, subjects: Mapping[str, str], how: str) -> None:
        if subjects:
            self.backend.put(actor_id, namespace, subjects, how)

    def forget(self, ids: Sequence[str], shard: Shard | None = None) -> int:
        return self.backend.forget(ids, shard) if ids else 0

    def forget_removed(self, shard: Shard, removed: Mapping[str, str | None]) -> tuple[int, int]:
        """Removed records of one shard (erased, deleted; id -> content, None if unknown):
        their keys go. A key is made of the words of the record that first had it, and the
        records grouped under it since carry those words: when a removed record's words
        made its key, the key also comes off every other record of the shard, which gets a
        key of its own words the next night (the one time a key moves). Another member's
        removal moves nothing. A removed record whose text is unknown (an erase resumed
        after a crash past its delete: the record is gone) may have made its key: the key
        comes off the others too (a key moved, never erased words kept; audit 52h).
        Returns (the removed records' keys, keys taken off others)."""
        if not removed:
            return 0, 0
        keys = self.get(shard, list(removed))
        own = self.backend.forget(list(removed), shard)
        made = {
            key
            for rid, key in keys.items()
            if (text := removed.get(rid)) is None or _made_from(key, text)
        }
        return own, self.backend.forget_keys(shard, made) if made else 0


def needs_inference(views: Sequence[PlanView]) -> list[str]:
    """Ids of active records that carry no subject of their own."""
    return [
        v.id for v in views if v.status == Status.active and not (v.subject and v.subject.strip())
    ]


def _made_from(key: str, text: str) -> bool:
    """Whether ``key`` (group.infer_subjects: "first content words ~tag") was made of this
    text's words; "misc" (a text without content words) holds none."""
    from memlife.group import subject_keywords

    words = key.rsplit(" ~", 1)[0]
    return words != "misc" and words == subject_keywords(text)
