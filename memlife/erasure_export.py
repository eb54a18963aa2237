"""A store's erasures, carried with its records when the store moves (export, import).

Records are the import contract; what erasure keeps beside them is not a record:
  - tombstones (actor, record id, content hashes: never content) make the store refuse an
    erased text for good (memlife/tombstones.py);
  - pending erasures name held records whose erasure waits for the hold to go
    (memlife/erase.py), with why each was in its erasure (asked for, or derived).
A store migrated with records only took erased text back (an old export, a backup) and
released holds without erasing. ``memlife export --erasures FILE`` writes these as JSON
lines, ``memlife import --erasures FILE`` applies them after the records: tombstones
first, then each pending erasure is deferred again in the new store (its own journaled
operation and deferral receipt), so a release there erases as it would have here.
Standing disputes travel in the same file (memlife/dispute_export.py): a disputed record
is never deleted, and the new store's night would have deleted it at its deadline.
No line holds content. A bad line is refused by number and field; nothing of the
file is applied then (it is small, and half of it would be a false sense of erasure).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memlife import tombstones
from memlife.dispute_export import Dispute, carry_disputes, count_disputes, dump_disputes
from memlife.errors import InputError, RecordError, field_place
from memlife.stores.base import MemoryStore
from memlife.stores.sqlite import TOMBSTONE_NAME_MAX

SHA256 = r"^[0-9a-f]{64}$"
LINE_MAX = 64 << 10  # a line is a few hundred bytes; a bound keeps a hostile file cheap


class Tombstone(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["tombstone"]
    actor_id: str = Field(min_length=1, max_length=256)
    # "<id>#recorded" for a second hash, "#<16 hex>" per text erased again under the id
    record_id: str = Field(min_length=1, max_length=TOMBSTONE_NAME_MAX)
    content_sha256: str = Field(pattern=SHA256)
    norm_sha256: str | None = Field(None, pattern=SHA256)
    # when it was written (audit 51vi): a record of its id created before then is the erased
    # record under an older text; files written before have none (not told apart then)
    erased_at: datetime | None = None


class PendingErasure(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["pending_erasure"]
    record_id: str = Field(min_length=1, max_length=256)
    actor_id: str = Field(min_length=1, max_length=256)
    namespace: str = Field(min_length=1, max_length=1024)
    reason: str = Field(pattern=r"^[A-Z_]{1,64}$")  # why it was in its erasure (erase.py)
    requested_at: datetime


def dump_erasures(store: MemoryStore) -> Iterator[str]:
    """The store's tombstones, pending erasures and disputes, one JSON line each."""
    from memlife.erase import deferred_as, pending_erasures
    from memlife.journal import open_journal

    for t in tombstones.listing(store):
        yield Tombstone(
            kind="tombstone", actor_id=str(t["actor_id"]), record_id=str(t["record_id"]),
            content_sha256=str(t["content_sha256"]), norm_sha256=t.get("norm_sha256"),
            erased_at=t.get("erased_at"),
        ).model_dump_json()  # fmt: skip
    rows = pending_erasures(store)
    if rows:
        journal = open_journal(store)
        for p in rows:
            yield PendingErasure(
                kind="pending_erasure", record_id=p["record_id"], actor_id=p["actor_id"],
                namespace=p["namespace"], reason=deferred_as(journal, p),
                requested_at=p["requested_at"],
            ).model_dump_json()  # fmt: skip
    yield from dump_disputes(store)


def count_erasures(store: MemoryStore) -> int:
    """Lines ``dump_erasures`` would write (tombstones, pending erasures, disputes)."""
    from memlife.erase import pending_erasures

    return len(tombstones.listing(store)) + len(pending_erasures(store)) + count_disputes(store)


Carried = PendingErasure | Dispute  # the lines applied after the tombstones


def parse_erasures(
    lines: Iterable[str | bytes],
) -> tuple[list[Tombstone], list[Carried]]:
    """Every line checked before any is applied; InputError names the line and field.
    Lines may come as bytes (the CLI reads the file so): each is decoded on its own, and a
    line too long, not UTF-8, nested too deep or holding a number past Python's digit limit
    is refused by number like any other bad line (these failed naming no line, or with a
    RecursionError)."""
    from memlife.import_lines import checked_text

    tombs: list[Tombstone] = []
    pending: list[Carried] = []
    for n, line in enumerate(_bounded(lines), 1):
        if len(line) > LINE_MAX:
            raise InputError(f"erasures line {n}: longer than {LINE_MAX} bytes")
        if isinstance(line, bytes):
            try:  # the importer's own check of a line: UTF-8, not nested too deep
                line = checked_text(line, n)
            except RecordError as exc:
                raise InputError(f"erasures line {n}: {exc.reason}") from None
        if not line.strip():
            continue
        try:
            data = json.loads(line)
            kind = data.get("kind") if isinstance(data, dict) else None
            if kind == "tombstone":
                tombs.append(Tombstone.model_validate(data))
            elif kind == "pending_erasure":
                pending.append(PendingErasure.model_validate(data))
            elif kind == "dispute":
                pending.append(Dispute.model_validate(data))
            else:
                raise InputError(
                    f"erasures line {n}: field 'kind': not tombstone/pending_erasure/dispute"
                )
        except InputError:
            raise
        except ValidationError as exc:
            field = field_place(exc.errors()[0]["loc"]) or "line"  # a key's text: <key>
            raise InputError(
                f"erasures line {n}: field '{field}': {exc.errors()[0]['msg']}"
            ) from None
        except (ValueError, RecursionError):  # not JSON; a number past the digit limit
            raise InputError(f"erasures line {n}: not a JSON object") from None
    return tombs, pending


def _bounded(lines: Iterable[str | bytes]) -> Iterator[str | bytes]:
    """``lines``; from a file, each read at most LINE_MAX + 1 at a time. Iterating a file
    reads each line whole, so a line with no end (a damaged file, 1 GB without a newline)
    was held whole before its bound was checked (audit 51i). A longer line now comes as
    its first LINE_MAX + 1, which the bound refuses by number; every other line as before."""
    readline = getattr(lines, "readline", None)
    if readline is None:
        yield from lines
        return
    while line := readline(LINE_MAX + 1):
        yield line


def load_erasures(
    store: MemoryStore, lines: Iterable[str], *, policy: Any = None, receipts: Any = None
) -> dict[str, Any]:
    """Apply an erasures file to ``store`` (after its records were imported)."""
    return apply_erasures(store, *parse_erasures(lines), policy=policy, receipts=receipts)


def apply_erasures(
    store: MemoryStore, tombs: list[Tombstone], lines: Sequence[Carried], *,
    policy: Any = None, receipts: Any = None,
) -> dict[str, Any]:  # fmt: skip
    """Apply parsed erasures (``parse_erasures``) to ``store``. A record a tombstone names,
    under its own id and text (an older backup restored with today's erasures), is erased
    again, with its receipt, once the tombstones are in; the disputes come last."""
    from memlife.erase import carry_pending, erase
    from memlife.model import utcnow

    pending = [p for p in lines if isinstance(p, PendingErasure)]
    disputes = [d for d in lines if isinstance(d, Dispute)]

    _refuse_pending_not_held(store, pending)
    stale = _refuse_live_text(
        store, tombs, {(p.actor_id, p.namespace, p.record_id) for p in pending}
    )
    rows = [(t.actor_id, t.record_id, t.content_sha256, t.norm_sha256) for t in tombs]
    added = tombstones._backend(store).add_tombstones(rows) if rows else 0
    out: dict[str, Any] = {"tombstones": len(tombs), "tombstones_added": max(added, 0)}
    for actor, ids in sorted(stale.items()):  # the erased records an older export held
        # a replacement of another of them follows from that one (rebuilt, or withdrawn with
        # its kept sources back), as in the erasure; asked for itself, its kept sources went too
        asked = [i for i in ids if not set(_supersedes(store, i)) & set(ids)] or ids
        done = erase(store, actor, ids=asked, pending=False, policy=policy, receipts=receipts)
        out.setdefault("erased_again", []).extend(done.get("erased", []))
        if done.get("deferred"):  # held in the backup: erased once its hold is released
            out.setdefault("deferred_again", []).extend(done["deferred"])
    if pending:
        out |= carry_pending(store, pending, policy=policy, receipts=receipts)
    if disputes:
        out["disputes"] = carry_disputes(store, disputes, now=utcnow())
    return out


def _supersedes(store: MemoryStore, rid: str) -> list[str]:
    r = store.get(rid)
    return list(r.provenance.supersedes) if r is not None else []


def _refuse_pending_not_held(store: MemoryStore, pending: list[PendingErasure]) -> None:
    """A pending erasure waits for its record's hold. A line naming a record of its scope
    that is not held here does not belong to these records: deferred anyway, the record
    was erased by the next release of any hold, asked by nobody in this store."""
    free = []
    for p in pending:
        r = store.get(p.record_id)
        if r is not None and (r.actor_id, r.namespace) == (p.actor_id, p.namespace) and not r.held:
            free.append(p.record_id)
    if free:
        raise InputError(
            f"erasures: pending erasures name {len(free)} record(s) not under legal hold here "
            f"({', '.join(sorted(free)[:5])}): not this store's erasures"
        )


def _refuse_live_text(
    store: MemoryStore, tombs: list[Tombstone], deferred: set[tuple[str, str, str]]
) -> dict[str, list[str]]:
    """A tombstone says its text was erased; a live record of that actor holding it (not a
    held copy the file defers: same actor, namespace and id) means the file does not
    belong to these records: taken as is, it would have the next release of any hold erase
    that record, asked by nobody. The erased record itself (the tombstone's own id and
    text: an older backup) is no such record: returned, actor -> ids, to erase again; so is
    a record of a tombstone's id created before that tombstone was written (the erased
    record under an older text, as the erasing store's _ERASED_BEFORE reads it: audit 51vi)."""
    from memlife.erase import actor_records, text_keys, tombstone_keys
    from memlife.tombstones import erased_id

    by_actor: dict[str, set[str]] = {}
    own: dict[tuple[str, str], set[str]] = {}  # (actor, erased id) -> its text keys
    erased: dict[tuple[str, str], datetime] = {}  # (actor, erased id) -> its last erasure
    names: dict[str, set[str]] = {}
    for t in tombs:
        names.setdefault(t.actor_id, set()).add(t.record_id)
    for t in tombs:
        keys = tombstone_keys(t.content_sha256, t.norm_sha256)
        by_actor.setdefault(t.actor_id, set()).update(keys)
        # a second text erased under a reused id is named 'id#<hex>': the id it stands for
        rid = erased_id(t.record_id, t.content_sha256, names[t.actor_id])
        own.setdefault((t.actor_id, rid), set()).update(keys)
        if t.erased_at is not None:
            at = _aware(t.erased_at)
            erased[(t.actor_id, rid)] = max(at, erased.get((t.actor_id, rid), at))
    stale: dict[str, list[str]] = {}
    for actor, keys in sorted(by_actor.items()):
        live = []
        for r in actor_records(store, actor):
            if r.held and (r.actor_id, r.namespace, r.id) in deferred:
                continue
            when = erased.get((actor, r.id))
            if when is not None and _aware(r.created_at) <= when:
                stale.setdefault(actor, []).append(r.id)  # the erased record, an older text
                continue
            if not text_keys(r) & keys:
                continue
            if text_keys(r) & own.get((actor, r.id), set()):
                stale.setdefault(actor, []).append(r.id)
            else:
                live.append(r.id)
        if live:
            raise InputError(
                f"erasures: tombstones of actor {actor} match {len(live)} live record(s) the "
                f"file does not defer ({', '.join(sorted(live)[:5])}): not this store's erasures"
            )
    return stale


def _aware(at: datetime) -> datetime:
    """A time to compare: one without a zone is UTC (as the stores read such times)."""
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)
