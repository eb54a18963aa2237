"""Session 27: the online library's arguments an adversary can still get past the checks
(docs/adversarial-review.md, "Left": ``remember`` accepted a 10 MB subject or owner, a
blank subject and ``at`` in year 9999). Each test failed on the code before.

The rules, as ``memlife/online/inputs.py`` states them:

- subject and owner: at most 256 characters (``LABEL_MAX_CHARS``); one with no visible
  character (blank, whitespace, zero-width or other invisible characters) is no subject /
  no owner, stored as None, as the nightly run already reads a blank one;
- actor, namespace and a replacement's id: at most the record's own bounds (256, 1024 and
  256 characters);
- ``at``: not more than ``model.FUTURE_SKEW`` (5 minutes) past the clock, the margin past
  which the importer reports FUTURE_CREATED_AT; not before the Unix epoch.

A refusal is an InputError naming the argument as the caller wrote it, short (never the
argument's text quoted back), and nothing is written: not a new record, not a refresh.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from memlife import Memory
from memlife.errors import InputError
from memlife.ledger import AccessLedger
from memlife.model import FUTURE_SKEW, Status, utcnow
from memlife.online.memory import LongTermMemory
from memlife.stores.sqlite import SqliteStore

NS = "/users/u1/facts"
TEN_MB = 10 * 1024 * 1024
LABEL_MAX = 256  # inputs.LABEL_MAX_CHARS, written out: the test states the rule
FACT = "Drinks only green tea, never coffee."


@pytest.fixture()
def store(home: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(home / "memlife.db")
    yield s
    s.close()


@pytest.fixture()
def mem(store: SqliteStore, home: Path) -> Iterator[LongTermMemory]:
    m = LongTermMemory(store, ledger=AccessLedger(home / "ledger"))
    yield m
    m.close()


def snapshot(store: SqliteStore) -> list[str]:
    """Every record as stored, every field: a refresh moves last_accessed_at and the count."""
    return sorted(r.model_dump_json() for r in store.iter_all())


def refused(call: Callable[[], object], argument: str) -> InputError:
    """``call()`` raises an InputError that starts with ``argument``'s name (as the caller
    wrote it) and quotes nothing long."""
    with pytest.raises(InputError) as info:
        call()
    message = str(info.value)
    assert message.startswith(f"{argument} "), message[:300]
    assert len(message) < 300, f"the refusal quotes the argument back: {len(message)} chars"
    return info.value


def test_a_10_mb_subject_or_owner_is_refused_by_name_and_writes_nothing(
    store: SqliteStore, mem: LongTermMemory
) -> None:
    mem.remember("u1", NS, None, FACT)  # a duplicate to refresh: refusing it must not either
    before = snapshot(store)
    huge = "s" * TEN_MB
    for fact in (FACT, "Has a dog named Rex."):  # the refresh path and the insert path
        refused(lambda f=fact: mem.remember("u1", NS, huge, f), "subject")
        refused(lambda f=fact: mem.remember("u1", NS, "diet", f, owner=huge), "owner")
        # a long run of spaces is not "no subject": it is refused for its size first
        refused(lambda f=fact: mem.remember("u1", NS, " " * TEN_MB, f), "subject")
    assert snapshot(store) == before


def test_a_subject_or_owner_over_the_bound_is_refused_at_the_bound_kept(
    store: SqliteStore, mem: LongTermMemory
) -> None:
    before = snapshot(store)
    refused(lambda: mem.remember("u1", NS, "x" * (LABEL_MAX + 1), FACT), "subject")
    refused(lambda: mem.remember("u1", NS, "diet", FACT, owner="t" * (LABEL_MAX + 1)), "owner")
    # characters, not bytes: 256 of a four-byte character fit, 257 do not
    refused(lambda: mem.remember("u1", NS, "😀" * (LABEL_MAX + 1), FACT), "subject")
    assert snapshot(store) == before
    rid = mem.remember("u1", NS, "😀" * LABEL_MAX, FACT, owner="t" * LABEL_MAX).record_id
    got = store.get(rid)
    assert got is not None and got.subject == "😀" * LABEL_MAX and got.owner == "t" * LABEL_MAX
    # a subject with something visible in it is kept as written, invisible characters too
    rid = mem.remember("u1", NS, " pets\u200b ", "Has a dog.", owner="\u200bteam-a").record_id
    got = store.get(rid)
    assert got is not None and got.subject == " pets\u200b " and got.owner == "\u200bteam-a"


def test_the_public_api_refuses_them_too(store: SqliteStore, home: Path) -> None:
    with Memory(store, ledger=home / "ledger-api") as memory:
        refused(lambda: memory.remember(FACT, actor="u1", subject="s" * TEN_MB), "subject")
        refused(lambda: memory.remember(FACT, actor="u1", owner="o" * TEN_MB), "owner")
        far = datetime(9999, 12, 31, 23, 59, tzinfo=UTC)
        refused(lambda: memory.remember(FACT, actor="u1", at=far), "at")
    assert snapshot(store) == []


@pytest.mark.parametrize(
    "blank",
    [" ", "\t\n  ", "\u200b", "\u200b\u2060\ufeff", "\u3164", "\u00a0\u2003", "\x00"],
    ids=["space", "whitespace", "zero-width", "joiners-bom", "hangul-filler", "nbsp-em", "nul"],
)
def test_a_subject_or_owner_nobody_can_see_is_none(
    store: SqliteStore, mem: LongTermMemory, blank: str
) -> None:
    """The nightly run reads a blank subject as none (it infers one) and a blank owner as
    missing (review); a zero-width one it would have kept as a real, invisible key, and an
    invisible owner passed for an owner. remember stores None for both."""
    rid = mem.remember("u1", NS, blank, FACT, owner=blank).record_id
    got = store.get(rid)
    assert got is not None and got.subject is None and got.owner is None
    # a duplicate's refresh fills a missing subject in: never with an invisible one
    again = mem.remember("u1", NS, blank, FACT)
    assert again.created is False and again.record_id == rid
    got = store.get(rid)
    assert got is not None and got.subject is None


@pytest.mark.parametrize(
    "at",
    [
        datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, tzinfo=timezone(timedelta(hours=14))),
        datetime(2100, 1, 1, tzinfo=UTC),
        "in an hour",
    ],
    ids=["year-9999", "year-9999-plus14", "year-2100", "an-hour-ahead"],
)
def test_at_in_the_future_is_refused_and_refreshes_nothing(
    store: SqliteStore, mem: LongTermMemory, at: datetime | str
) -> None:
    when = utcnow() + timedelta(hours=1) if at == "in an hour" else at
    mem.remember("u1", NS, "beverage", FACT)
    before = snapshot(store)
    # the duplicate was refreshed with last_accessed_at in 9999: read as fresh for ever
    refused(lambda: mem.remember("u1", NS, "beverage", FACT, at=when), "at")
    refused(lambda: mem.remember("u1", NS, None, "Has a dog named Rex.", at=when), "at")
    assert snapshot(store) == before


def test_at_within_the_importers_skew_is_taken(store: SqliteStore, mem: LongTermMemory) -> None:
    """The importer reports a created_at more than FUTURE_SKEW past its clock and takes the
    rest; remember refuses past that margin and takes a clock a little ahead of ours."""
    ahead = utcnow() + FUTURE_SKEW - timedelta(seconds=30)
    rid = mem.remember("u1", NS, None, FACT, at=ahead).record_id
    got = store.get(rid)
    assert got is not None and got.created_at == ahead
    refused(lambda: mem.remember("u1", NS, None, "Has a dog.", at=utcnow() + 2 * FUTURE_SKEW), "at")


@pytest.mark.parametrize(
    "at",
    [
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(1, 1, 1, 12, tzinfo=timezone(timedelta(hours=-5))),
        datetime(999, 12, 31, tzinfo=UTC),
        datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC),
    ],
    ids=["year-1", "year-1-minus5", "year-999", "before-epoch"],
)
def test_at_before_the_unix_epoch_is_refused(
    store: SqliteStore, mem: LongTermMemory, at: datetime
) -> None:
    """datetime.min as a sentinel, a time parsed as 0 years: an episodic record dated then
    is past its TTL at once (stored, reported created, never recalled); on AgentCore a year
    under 1000 is written as a timestamp nobody can read back."""
    mem.remember("u1", NS, "beverage", FACT)
    before = snapshot(store)
    refused(lambda: mem.remember("u1", NS, "beverage", FACT, at=at), "at")
    refused(lambda: mem.remember("u1", NS, None, "Went hiking.", "user_stated", "episodic", at=at),
            "at")  # fmt: skip
    assert snapshot(store) == before
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    rid = mem.remember("u1", NS, None, "Has a dog named Rex.", at=epoch).record_id
    got = store.get(rid)
    assert got is not None and got.created_at == epoch


def test_an_actor_or_namespace_no_record_can_have_is_refused_by_name(
    store: SqliteStore, mem: LongTermMemory
) -> None:
    """The record bounds actor_id at 256 characters and namespace at 1024: remember used to
    load the shard, embed the fact and then fail in the model's validation (a pydantic
    error naming ``actor_id`` and quoting the value); recall answered [] for an actor no
    record can have, where a namespace no record can have is already refused."""
    rid = mem.remember("u1", NS, None, FACT).record_id
    before = snapshot(store)
    long_actor = "a" * TEN_MB
    long_ns = "/users/" + "n" * TEN_MB
    refused(lambda: mem.remember(long_actor, NS, None, FACT), "actor")
    refused(lambda: mem.remember("u1", long_ns, None, FACT), "namespace")
    refused(lambda: mem.remember("a" * 257, NS, None, FACT), "actor")
    refused(lambda: mem.remember("u1", "/" + "n" * 1024, None, FACT), "namespace")
    refused(lambda: mem.recall(long_actor, "tea"), "actor")
    refused(lambda: mem.recall("u1", "tea", namespace=long_ns), "namespace")
    # a long namespace that is also malformed: refused for its size, never quoted whole
    refused(lambda: mem.recall("u1", "tea", namespace="/users/../" + "n" * TEN_MB), "namespace")
    assert snapshot(store) == before
    # at the bounds: taken
    ok = mem.remember("a" * 256, "/" + "n" * 1023, None, FACT)
    assert ok.created and store.get(ok.record_id) is not None
    assert [h.record.id for h in mem.recall("u1", "green tea")] == [rid]


def test_set_status_refuses_a_replacement_id_no_record_can_have_without_quoting_it(
    store: SqliteStore, mem: LongTermMemory
) -> None:
    rid = mem.remember("u1", NS, None, FACT).record_id
    before = snapshot(store)
    refused(
        lambda: mem.set_status([rid], Status.superseded, replaced_by="r" * TEN_MB), "replaced_by"
    )
    refused(lambda: mem.set_status([rid], Status.superseded, replaced_by="r" * 257), "replaced_by")
    assert snapshot(store) == before
    # an unknown id to forget is left alone, as documented; one no record can have (over
    # the id's 256 characters) is refused by name, as replaced_by is (test_online_namespace_reads)
    assert mem.forget(["i" * 256]) == []
    refused(lambda: mem.forget(["i" * TEN_MB]), "record_ids")
    assert snapshot(store) == before


def test_a_backdated_restatement_never_moves_recency_back(mem: LongTermMemory) -> None:
    """Saying a known fact again with an older ``at`` (a backfill) counts the access, and
    leaves last_accessed_at and last_verified_at where they were: recency feeds the nightly
    score, and an old statement is not news."""
    now = utcnow()
    first = mem.remember("u1", NS, "drinks", FACT, at=now)
    again = mem.remember("u1", NS, "drinks", FACT, at=now - timedelta(days=300))
    assert again.record_id == first.record_id and not again.created
    rec = mem.store.get(first.record_id)
    assert rec is not None and rec.access_count == 1
    assert rec.last_accessed_at is not None and rec.last_accessed_at >= now
    assert rec.last_verified_at is None or rec.last_verified_at >= now


def test_a_chain_of_online_supersedes_hands_the_older_record_over(mem: LongTermMemory) -> None:
    """set_status(A, superseded, B) then set_status(B, superseded, C): A points to C, as a
    reviewer's and the night's hand-over leave it (invariant 3: never to a superseded B)."""
    a, b, c = (
        mem.remember("u1", NS, "seat", text).record_id
        for text in ("Prefers aisle seats.", "Prefers window seats.", "Prefers exit rows.")
    )
    assert mem.set_status([a], "superseded", replaced_by=b) == [a]
    assert mem.set_status([b], "superseded", replaced_by=c) == [b]
    older = mem.store.get(a)
    assert older is not None and older.status is Status.superseded
    assert older.provenance.replaced_by == c
