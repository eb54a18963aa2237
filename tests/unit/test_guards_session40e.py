"""Guards left untested by the fortieth audit (session 40): an adversarial review of the
session's own changes: the DynamoDB lease's takeover watch (memlife/state/lease.py), the
restatement rules of session 40 (lists at a clause's ends, the subject with the word before
the last, "then" after an event: memlife/restate.py), and the erasure of a released copy of
a text whose request a hold still defers (memlife/erase.py ``still_held``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

import memlife.state.lease as dynamo_lease_mod
from memlife.erase import erase, pending_erasures, plan_erasure, release_hold
from memlife.model import RetentionClass, Status
from memlife.state.dynamodb import DynamoState
from memlife.state.lease import DynamoLease, LeaseHeld
from memlife.stores.sqlite import SqliteStore
from tests.support.aws_state import aws_state
from tests.support.restating import both as _both
from tests.support.restating import neither as _neither
from tests.unit.test_erase import NOW, rec

STORE = "agentcore://mem-40e@us-east-1"


# -- restate: a list at either end of a clause ---------------------------------------------
@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Cats and dogs hate mice.", "Cats and mice hate dogs."),
        ("Cats, dogs hate mice.", "Cats, mice hate dogs."),
        ("Cats and also dogs hate mice.", "Cats and also mice hate dogs."),
    ],
)
def test_every_item_of_a_list_that_opens_a_clause_pairs_with_its_end(a: str, b: str) -> None:
    """Attacks ``head.append`` in `memlife/restate.py::_shape` and ``tok == ","`` / the
    filler that keeps a list going in ``_joined``: the first item ("cats") stays put, so
    only the second item's pair with the end tells "dogs hate mice" from "mice hate dogs"."""
    assert _neither(a, b)


def test_every_item_of_a_list_that_ends_a_clause_pairs_with_its_subject() -> None:
    """Attacks ``tail.append`` in `memlife/restate.py::_shape`: "mom gave dad cake and tea"
    is not "dad gave mom cake and tea" (the subject pairs with "cake", before the list's
    last item, only through the tail list)."""
    assert _neither("Mom gave dad cake and tea.", "Dad gave mom cake and tea.")


def test_a_list_that_opens_a_clause_pairs_with_the_word_before_a_link() -> None:
    """Attacks ``for h in head`` in the link/trailing pairs of `memlife/restate.py::_shape`:
    with a prepositional tail ("at night") the clause's last word is "night"; only the
    head list's second item paired with the word before "at" holds the trade."""
    assert _neither("Cats and dogs chase mice at night.", "Cats and mice chase dogs at night.")


# -- restate: "then" ---------------------------------------------------------------------
@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Jon was back then working at a bank.", "Jon was working at a bank back then."),
        ("Jon was since then working at a bank.", "Jon was working at a bank since then."),
        ("Jon was until then working at a bank.", "Jon was working at a bank until then."),
        ("Jon was even then dancing daily.", "Jon was dancing daily even then."),
        ("Jon was right then dancing with Gina.", "Jon was dancing with Gina right then."),
        ("The kids then went camping.", "The kids went camping then."),
    ],
)
def test_then_as_a_time_or_after_one_word_orders_nothing(a: str, b: str) -> None:
    """Attacks ``_THEN_AS_TIME`` ("back", "since", "until", "even", "right") and
    ``seen += w not in _FILLER`` in `memlife/restate.py::_sides`: a "then" that is a time,
    or follows only a subject and an article, moves no word to another side."""
    assert _both(a, b)


def test_three_events_in_another_order_are_another_statement() -> None:
    """A bug this audit found (fixed), in `memlife/restate.py::_sides`: a clause mark
    resets ``side`` to 0, so in
    "A, then B, then C" both B and C stand on side 1: "ate lunch, then swam, then read"
    restates "ate lunch, then read, then swam" and a merge keeps one order of the two."""
    assert _neither("Ate lunch, then swam, then read.", "Ate lunch, then read, then swam.")


def test_then_after_be_is_a_time() -> None:
    """A regression this audit found (fixed; false "different"), in
    `memlife/restate.py::_sides`: "she was then living in Paris" restated "she was living
    in Paris then" before; "was" counts as an event (``seen > 1``), so the words after
    "then" move to side 1 and a faithful rewrite is kept as a second statement."""
    assert _both("She was then living in Paris.", "She was living in Paris then.")


# -- restate: the subject with the word before the last ------------------------------------
@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Mom sent dad flowers yesterday.", "Dad sent mom flowers yesterday."),
        ("Sister owes brother money now.", "Brother owes sister money now."),
    ],
)
def test_a_trade_before_a_second_object_and_a_time_word_is_seen(a: str, b: str) -> None:
    """A bug this audit found (fixed), in `memlife/restate.py::_shape` (rule of session
    40): "sister owes brother
    money" is kept apart from "brother owes sister money", but not once a time word ends
    the clause: ``second`` is the word before the last ("money"), so "dad"/"mom" pair with
    nothing and two facts merge into one."""
    assert _neither(a, b)


def test_a_two_word_item_of_a_list_that_opens_a_clause_pairs_with_the_end() -> None:
    """Found open in session 40, fixed in session 41 (`memlife/restate.py::_head_list`): the
    head list ended at the first word that is not joined, so "his old friend" contributed
    only "his"; "Jon and his old friend met Gina" restated "Jon and Gina met his old friend"
    (who met whom was lost)."""
    assert _neither("Jon and his old friend met Gina.", "Jon and Gina met his old friend.")


# -- the DynamoDB lease's takeover ---------------------------------------------------------
@pytest.fixture()
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, object]]:
    """A wall clock memlife.state.lease reads (``t``), and what its watch's sleep does."""
    c: dict[str, object] = {"t": 1_000_000.0, "on_sleep": None, "slept": []}

    def sleep(s: float) -> None:
        slept = c["slept"]
        assert isinstance(slept, list)
        slept.append(s)
        hook = c["on_sleep"]
        if callable(hook):
            hook()

    def now() -> float:
        t = c["t"]
        assert isinstance(t, float)
        return t

    monkeypatch.setattr(dynamo_lease_mod, "time", SimpleNamespace(time=now, sleep=sleep))
    yield c


@pytest.fixture()
def state() -> Iterator[DynamoState]:
    with aws_state("inprocess", table="memlife-s40e-lease") as (_, st):
        yield st


def test_a_lease_at_its_expiry_second_is_still_held(
    clock: dict[str, object], state: DynamoState
) -> None:
    """Attacks ``>= time.time()`` in `memlife/state/lease.py::DynamoLease.acquire`: a lease
    whose ``expires_at`` is this very second has not expired (the module doc: once it has
    passed): the taker is refused at once, with no watch."""
    holder = DynamoLease(state, STORE, "H", ttl_s=60)
    holder.acquire()
    clock["t"] = 1_000_060.0
    with pytest.raises(LeaseHeld):
        DynamoLease(state, STORE, "T", ttl_s=60).acquire()
    assert clock["slept"] == []


def _taker_sees_it_expired(clock: dict[str, object], hook: object) -> None:
    clock["on_sleep"] = hook
    clock["t"] = 1_000_100.0  # the taker's clock runs 100 s ahead of the holder's


def test_a_renewal_in_the_same_second_stops_the_takeover(
    clock: dict[str, object], state: DynamoState
) -> None:
    """Attacks ``beat = :beat`` in `memlife/state/lease.py::DynamoLease._watch` and the beat
    ``renew`` counts: a renewal within the second of the last one writes the same
    ``expires_at``; only the beat shows the holder alive. The taker is refused after one
    watch (not three: ``_refuse(now_seen)`` once the same holder renewed)."""
    holder = DynamoLease(state, STORE, "H", ttl_s=3)
    holder.acquire()  # expires 1_000_003

    def renew() -> None:
        saved = clock["t"]
        clock["t"] = 1_000_000.4
        holder.renew()  # expires 1_000_003 again, beat 1
        clock["t"] = saved

    _taker_sees_it_expired(clock, renew)
    with pytest.raises(LeaseHeld, match="leased to H"):
        DynamoLease(state, STORE, "T", ttl_s=3).acquire()
    assert clock["slept"] == [1.5]


def test_a_lease_written_before_beats_renewed_by_its_old_holder_is_not_taken(
    clock: dict[str, object], state: DynamoState
) -> None:
    """Attacks ``expires_at = :exp`` in `memlife/state/lease.py::DynamoLease._watch`: an
    item with no beat (a holder running an older memlife) shows a renewal only by its
    expiry."""
    item = {**DynamoLease(state, STORE, "H")._key(), "holder": {"S": "H"},
            "expires_at": {"N": "1000060"}, "run_id": {"S": ""}}  # fmt: skip
    state.ddb.put_item(TableName=state.table, Item=item)

    def old_renew() -> None:
        state.ddb.put_item(TableName=state.table, Item={**item, "expires_at": {"N": "1000090"}})

    _taker_sees_it_expired(clock, old_renew)
    with pytest.raises(LeaseHeld, match="leased to H"):
        DynamoLease(state, STORE, "T", ttl_s=10).acquire()
    assert clock["slept"] == [5.0]  # an item with no ttl_s: half the taker's own TTL


@pytest.mark.parametrize(("holder_ttl", "watch"), [(60, 30.0), (10**9, 43_200.0)])
def test_the_watch_lasts_half_the_holders_ttl_bounded_by_a_day(
    clock: dict[str, object], state: DynamoState, holder_ttl: int, watch: float
) -> None:
    """Attacks ``holder_ttl / 2``, ``seen.get("ttl_s")`` and ``min(..., MAX_TTL_S)`` in
    `memlife/state/lease.py::DynamoLease._watch`: the taker (TTL 10 s) watches half the TTL
    the item names, at most half a day for a foreign item's, then takes the dead lease."""
    DynamoLease(state, STORE, "H", ttl_s=holder_ttl).acquire()
    clock["t"] = 1_000_000.0 + holder_ttl + 1
    taken = DynamoLease(state, STORE, "T", ttl_s=10).acquire()
    assert clock["slept"] == [watch] and taken is not None and taken["owner"] == "H"


def test_a_lease_given_back_during_the_watch_is_taken_free(
    clock: dict[str, object], state: DynamoState
) -> None:
    """Attacks ``for _ in range(3)`` in `memlife/state/lease.py::DynamoLease.acquire`: the
    watched holder gives the lease back, the conditional takeover is refused (no item), and
    the taker looks again and takes the free lease instead of refusing with nobody holding."""
    holder = DynamoLease(state, STORE, "H", ttl_s=3)
    holder.acquire()
    _taker_sees_it_expired(clock, holder.release)
    taker = DynamoLease(state, STORE, "T", ttl_s=3)
    assert taker.acquire() is None  # a free lease: nobody taken over
    item = state.get(taker._key())
    assert item is not None and item["holder"] == {"S": "T"}


def test_a_lease_given_back_and_taken_again_during_the_watch_is_not_taken_over(
    clock: dict[str, object], state: DynamoState
) -> None:
    """A bug this audit found (fixed), in `memlife/state/lease.py::DynamoLease._watch`: the
    takeover is
    conditional on (holder, expires_at, beat), but a process's holder name is the same for
    every lease it takes (memlife.lease.OWNER), expires_at has whole seconds and a fresh
    take resets beat to 0. A holder (short TTL, its clock behind the taker's) that gives
    the lease back and takes it again within that second, during the watch, writes the same
    triple: the taker takes a lease its holder trusts for a third of its TTL (two writers)."""
    holder = DynamoLease(state, STORE, "H", ttl_s=3)
    holder.acquire()  # at 1_000_000.0 on the holder's clock: expires 1_000_003, beat 0

    def again() -> None:  # during the watch: two erasures one after the other
        clock["t"] = 1_000_000.5
        holder.release()
        holder.acquire()  # a new lease: expires 1_000_003 again, beat 0
        clock["t"] = 1_000_102.0

    clock["on_sleep"] = again
    clock["t"] = 1_000_100.0  # the taker's clock runs 100 s ahead
    with pytest.raises(LeaseHeld):
        DynamoLease(state, STORE, "T", ttl_s=3).acquire()


# -- erasure: what a still-held request reaches -------------------------------------------
@pytest.fixture()
def db(home: Path) -> Iterator[SqliteStore]:
    with SqliteStore(home / "memlife.db") as store:
        yield store


def test_a_still_held_request_of_another_actor_reaches_nothing(db: SqliteStore) -> None:
    """Attacks ``rid in by_id`` in `memlife/erase.py::plan_erasure`: a still-held request
    is the asking actor's own; another actor's record with the same text named there
    reaches none of this actor's records (actors never mixed)."""
    text = "Is allergic to two medications."
    db.put_many([rec("o-1", text, actor="u-2"), rec("m-1", text), rec("m-2", "Other.")])
    plan = plan_erasure(db, "u-1", erased_earlier=True, still_held=["o-1"])
    assert plan.why == {} and plan.targets == []


def test_a_still_held_request_is_planned_as_a_request_when_also_asked(
    db: SqliteStore,
) -> None:
    """Attacks ``rid not in why`` and ``w != STILL_HELD`` in
    `memlife/erase.py::plan_erasure`: a record asked for now keeps ERASURE_REQUEST even
    when it is also named as still held; one only still held stays out of the plan while
    its copies are reached."""
    text = "Is allergic to two medications."
    db.put_many([rec("m-1", text), rec("m-2", text), rec("m-3", text)])
    plan = plan_erasure(db, "u-1", ids=["m-1"], still_held=["m-1", "m-2"])
    assert plan.why == {"m-1": "ERASURE_REQUEST", "m-3": "SAME_CONTENT"}


def test_releasing_a_replacement_a_still_held_source_points_to_keeps_it(
    db: SqliteStore,
) -> None:
    """A regression this audit found (fixed), in `memlife/erase.py::_select`/``_split_held``: m-a
    (held, superseded by r-1) is asked for; r-1, its held replacement, is deferred with it
    (pinned: invariant 3, a held source must not point to nothing). Releasing r-1's own hold
    plans it again from the still-held m-a (``still_held``), and since m-a stays out of the
    plan it is no longer among the held records that pin r-1: r-1 is erased now and the
    held m-a stays superseded by a record that no longer exists."""
    db.put_many([
        rec("m-a", "Has a dog named Rex.", subject="pets", status=Status.superseded,
            replaced_by="r-1", retention=RetentionClass.legal_hold),
        rec("m-b", "Has a cat named Tom.", subject="pets", status=Status.superseded,
            replaced_by="r-1"),
        rec("r-1", "Has a dog named Rex and a cat named Tom.", subject="pets",
            supersedes=("m-a", "m-b"), age=10, retention=RetentionClass.legal_hold),
    ])  # fmt: skip
    out = erase(db, "u-1", ids=["m-a"], now=NOW)
    assert sorted(out["deferred"]) == ["m-a", "r-1"]
    release_hold(db, ["r-1"])
    m_a = db.get("m-a")
    assert m_a is not None and m_a.held and m_a.provenance.replaced_by == "r-1"
    assert db.get("r-1") is not None, "the held m-a is superseded by nothing"
    assert sorted(p["record_id"] for p in pending_erasures(db, "u-1")) == ["m-a", "r-1"]


# -- erase --subject: the "nothing matched" hint -------------------------------------------
@pytest.mark.parametrize("count", [10, 11])
def test_the_inferred_hint_names_ten_records_at_most_and_no_content(home: Path, count: int) -> None:
    """Attacks ``[:10]`` and ``len(inferred) > 10`` in
    `memlife/cli/erase.py::_inferred_hint`: ten ids are named, "..." says there are more,
    and the refusal carries no record's text (only ids and the operator's own subject)."""
    from memlife.inferred import InferredSubjects
    from tests.support.cli import invoke

    db = home / "memlife.db"
    ids = [f"m-{i:02d}" for i in range(count)]
    with SqliteStore(db) as store:
        store.put_many([rec(i, f"Secret canary text {i}.") for i in ids])
        InferredSubjects.for_store(store).put(
            "u-1", "/users/u-1/facts", dict.fromkeys(ids, "allergy"), "remember"
        )
    code, _, err = invoke("erase", "--store", f"sqlite:///{db}", "--actor", "u-1",
                          "--subject", "allergy", "--yes")  # fmt: skip
    flat = " ".join(err.split())
    assert code == 1 and f"{count} carry it as an inferred subject" in flat
    assert [i for i in ids if i in flat] == ids[:10]
    assert ("..." in flat) is (count > 10)
    assert "canary" not in flat.lower()
