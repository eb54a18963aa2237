"""Audit 53m: a mutation pass over session 53's fixes.

Each test passes on the current code and fails under the hand mutant(s) its docstring
names (file, the change): the session's own tests let those mutants survive. None marks a
defect (the code is right); they pin the guarantees the fixes promise.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memlife import Memory, Status
from memlife.errors import InputError
from tests.fakes.messages_api import MessagesServer
from tests.unit.test_consolidation_adversarial import run_env  # noqa: F401 - its fixture

NS, PATH = ("users", "u1", "prefs"), "/users/u1/prefs"
TEA, COFFEE = {"content": "Drinks only green tea."}, {"content": "Never drinks coffee."}
NUL_KEY = "k\x001"  # at slot 0 the id of "k"'s slot 1 (audit 53t)


# -- LangGraph items (integrations/langgraph_ids.py, langgraph_values.py) -------------------
@pytest.fixture(name="lg")
def _lg(home: Path) -> Iterator[Any]:
    pytest.importorskip("langgraph.store.base")
    from memlife.integrations.langgraph import MemlifeStore

    store = MemlifeStore(Memory(f"sqlite:///{home / 'memlife.db'}", ledger=home / "ledger"))
    yield store
    store.memory.close()


def _rid(key: str, slot: int = 0) -> str:
    from memlife.integrations.langgraph import record_id

    return record_id("u1", PATH, key, slot)


def _out_of_service(lg: Any, rid: str, status: Status) -> None:
    if status is Status.superseded:
        lg.store.set_status([rid], status, replaced_by="rep-1")
    else:
        lg.store.set_status([rid], status)
    lg.memory.long_term.invalidate()


def test_a_put_after_a_merge_never_writes_over_another_keys_slot(lg: Any) -> None:
    """langgraph_ids.item_row, ``free = next(i for i in ids if i not in rows)`` -> ``not in
    found``: "k"'s slot 1 holds the item "k\\x001" (audit 53t); once "k"'s slot 0 is history,
    a put of "k" took slot 1 for free and wrote over the other item."""
    lg.put(NS, NUL_KEY, TEA)
    lg.put(NS, "k", {"content": "Likes oolong."})
    _out_of_service(lg, _rid("k"), Status.superseded)
    lg.put(NS, "k", COFFEE)
    other, mine = lg.get(NS, NUL_KEY), lg.get(NS, "k")
    assert other is not None and (other.key, other.value) == (NUL_KEY, TEA)
    assert mine is not None and (mine.key, mine.value) == ("k", COFFEE)
    assert lg.store.get(_rid("k", 2)).content == COFFEE["content"]


def test_a_put_never_writes_over_a_quarantined_value(lg: Any) -> None:
    """langgraph_ids.HISTORY without ``Status.quarantined``: a put of the key wrote the new
    value over the quarantined row, the one its snapshot restores (the gate's quarantine
    is recoverable; the new value would be lost on a restore, or the old one now)."""
    lg.put(NS, "k", TEA)
    _out_of_service(lg, _rid("k"), Status.quarantined)
    assert lg.get(NS, "k") is None
    lg.put(NS, "k", COFFEE)
    old = lg.store.get(_rid("k"))
    assert (old.status, old.content) == (Status.quarantined, TEA["content"])
    got = lg.get(NS, "k")
    assert got is not None and got.value == COFFEE


def test_a_restored_older_value_beside_a_newer_one_is_not_the_item(lg: Any) -> None:
    """langgraph_ids.item_row, ``max(live)`` -> ``min(live)``: a quarantined value restored
    beside the one put since (its docstring's case) answered the get with the old value."""
    lg.put(NS, "k", TEA)
    old = lg.store.get(_rid("k"))
    lg.store.put_many([old.model_copy(update={"created_at": old.created_at.replace(year=2020)})])
    _out_of_service(lg, _rid("k"), Status.quarantined)
    lg.put(NS, "k", COFFEE)
    lg.store.set_status([_rid("k")], Status.active)  # as a restore from its snapshot does
    lg.memory.long_term.invalidate()
    got = lg.get(NS, "k")
    assert got is not None and got.value == COFFEE
    lg.put(NS, "k", {"content": "Now drinks water."})  # an update of the newest value
    assert lg.store.get(_rid("k", 1)).content == "Now drinks water."
    assert lg.store.get(_rid("k")).content == TEA["content"]


@pytest.mark.parametrize("value", [math.inf, -math.inf])
def test_an_infinite_float_is_refused_by_name(lg: Any, value: float) -> None:
    """langgraph_values.json_problem, ``math.isfinite`` -> ``not math.isnan``: an infinite
    float went into the item as ``Infinity``, which is no JSON."""
    with pytest.raises(InputError, match="float"):
        lg.put(NS, "k", {"n": value})
    assert lg.get(NS, "k") is None


def test_a_dict_key_that_is_no_string_is_refused_by_name(lg: Any) -> None:
    """langgraph_values.json_problem, the ``isinstance(k, str)`` check dropped: ``{1: "a"}``
    was stored as ``{"1": "a"}`` and read back as another value."""
    with pytest.raises(InputError, match="int dict key"):
        lg.put(NS, "k", {"content": "x", 1: "a"})
    with pytest.raises(InputError, match="int dict key"):
        lg.put(NS, "k", {"nested": [{2: "b"}]})
    assert lg.get(NS, "k") is None


def test_a_key_at_the_bound_is_an_item_and_one_past_it_is_none(lg: Any) -> None:
    """langgraph_values, ``len(key) > KEY_MAX_CHARS`` -> ``>=`` in check_key (a key at the
    bound refused at the put) and in no_item_has (its get found nothing, its delete
    deleted nothing)."""
    from memlife.integrations.langgraph_values import KEY_MAX_CHARS

    at, past = "k" * KEY_MAX_CHARS, "k" * (KEY_MAX_CHARS + 1)
    lg.put(NS, at, TEA)
    got = lg.get(NS, at)
    assert got is not None and got.value == TEA
    lg.delete(NS, at)
    assert lg.get(NS, at) is None
    with pytest.raises(InputError, match="over the limit"):
        lg.put(NS, past, TEA)
    assert lg.get(NS, past) is None


# -- erasure: a rebuilt replacement's inferred key (erase._rebuild_now) ---------------------
def test_a_rebuilt_replacements_key_comes_off_the_records_grouped_under_it(
    offline_home: Path,
) -> None:
    """erase._rebuild_now: ``before`` read from the rebuilt text (``r.content``) instead of
    the text the replacement held, or the counts dropped (``+= 0``). The key made of the
    erased words stayed on another record grouped under it (invariant 11), and the
    receipt's ``inferred_subjects_forgotten`` / ``_rekeyed`` counted what was not done."""
    from memlife.erase import erase
    from memlife.inferred import InferredSubjects
    from memlife.stores.sqlite import SqliteStore
    from tests.unit import test_erase_rebuilt_key_session53a as base

    store = SqliteStore(offline_home / "memlife.db")
    try:
        key = base._merged(store)
        store.put_many([base.rec("x", "Keeps the spare key in the red bag.", 6)])
        InferredSubjects.for_store(store).put("u1", base.NS, {"x": key}, "nightly")
        out = erase(store, "u1", ids=["e"], now=base.NOW)
        assert out["rebuilt"] == ["r"]
        keys = base._keys(store)
        assert not [k for k in keys.values() if base.MARKER in k]
        assert "x" not in keys  # keyed afresh by its own words on the next night
        assert out["counts"]["inferred_subjects_forgotten"] == 2  # e's and r's own
        assert out["counts"]["inferred_subjects_rekeyed"] == 1  # x's
    finally:
        store.close()


# -- a retired record's supersede read from the journal (journal.open_supersede_link) -------
def _supersede(run: str, rid: str, actor: str, rep: str, sha: str) -> Any:
    from memlife.journal import Operation, OpKind, operation_id

    return Operation(
        operation_id=operation_id(run, OpKind.supersede, [rid]), run_id=run,
        kind=OpKind.supersede, actor_id=actor, namespace=f"/users/{actor}/facts",
        record_id=rid, reasons=["CONSOLIDATED"], policy_version="p1",
        content_sha256=sha, replacement_id=rep,
    )  # fmt: skip


@pytest.mark.parametrize("via", ["sqlite_file", "journal"])
def test_a_retired_records_link_is_its_latest_done_supersede_in_its_own_scope(
    home: Path, via: str
) -> None:
    """journal.open_supersede_link (run_planning._stands_for's hop for a record retention
    deleted): the outcome filter dropped (a failed supersede read as done), ``DESC`` ->
    ``ASC`` (the first replacement, not the latest), the actor and namespace dropped from
    the SQL, or from ``_supersede_link_via`` (the DynamoDB path): another tenant's
    supersede of its own record under the id answered for this one (a reviewer's keep
    stood for a pair nobody in this scope answered)."""
    from datetime import UTC, datetime, timedelta
    from functools import partial

    from memlife.journal import (
        OpState,
        Outcome,
        _supersede_link_via,
        open_journal,
        open_supersede_link,
    )
    from memlife.stores.sqlite import SqliteStore

    t0 = datetime(2026, 11, 1, 2, tzinfo=UTC)
    store = SqliteStore(home / "memlife.db")
    try:
        journal = open_journal(store)
        steps = [  # (op, outcome, hours after t0)
            (_supersede("run-1", "A", "u-1", "R1", "aa" * 32), Outcome.superseded, 1),
            (_supersede("run-2", "A", "u-1", "R2", "bb" * 32), Outcome.superseded, 2),
            (_supersede("run-3", "A", "u-1", "R3", "cc" * 32), Outcome.failed, 3),
            (_supersede("run-4", "A", "u-2", "R4", "dd" * 32), Outcome.superseded, 4),
            (_supersede("run-5", "B", "u-2", "R5", "ee" * 32), Outcome.superseded, 5),
        ]
        for o, outcome, hours in steps:
            journal.plan([o])
            to = OpState.FAILED if outcome is Outcome.failed else OpState.APPLIED
            journal.transition(o.operation_id, to, outcome=outcome, error=None,
                               at=t0 + timedelta(hours=hours))  # fmt: skip
        link = (open_supersede_link(store) if via == "sqlite_file"
                else partial(_supersede_link_via, journal))  # fmt: skip
        assert link is not None
        assert link("A", "u-1", "/users/u-1/facts") == ("bb" * 32, "R2")
        assert link("A", "u-2", "/users/u-2/facts") == ("dd" * 32, "R4")
        assert link("B", "u-1", "/users/u-1/facts") is None
        assert link("A", "u-1", "/users/u-2/facts") is None
    finally:
        store.close()


# -- past the model's seats (apply/groups._merges_unread, audit 53c) ------------------------
@pytest.fixture(name="messages_server")
def _messages_server() -> Iterator[MessagesServer]:
    with MessagesServer() as server:
        yield server


def test_a_dry_run_with_a_model_promises_no_merge_past_the_seats_unread(
    run_env: Path,  # noqa: F811
    messages_server: MessagesServer,
) -> None:
    """apply/groups._merges_unread, ``ex.memo_as or ...`` -> the dry run's own consolidator
    (extractive: it calls no model): a dry run for a night that will consolidate with the
    model promised the EpiPen record superseded by rule (``over_cap_superseded_by_rule``
    1), which the apply run keeps: the plan a reviewer approved was not the run."""
    from memlife.pipeline import RunConfig, run_local
    from tests.unit.test_consolidation_adversarial import NIGHT, _seed
    from tests.unit.test_consolidation_over_cap_session53c import EPIPEN, PEANUTS, _allergy

    _seed(run_env, [_allergy("a-00", EPIPEN, 1),
                    *[_allergy(f"a-{i:02d}", PEANUTS, 1 + i) for i in range(1, 13)]])  # fmt: skip
    dry = run_local(RunConfig(dry_run=True, now=NIGHT)).as_json()
    assert dry["other_counts"]["over_cap_superseded_by_rule"] == 0
    assert dry["other_counts"]["merged_duplicates"] == 11


def test_offline_the_rules_still_merge_a_near_copy_past_the_seats(
    run_env: Path,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """apply/groups._merges_unread -> ``return False``: with no model (the extractive
    consolidator, which reads no member's text within the seats either) the rules merge a
    near copy past the cap, as group_plan's docstring says (the mutant left it for ever:
    no model ever reads it)."""
    from memlife.pipeline import RunConfig, run_local
    from tests.unit.test_consolidation_adversarial import NIGHT, _seed, _state
    from tests.unit.test_consolidation_over_cap_session53c import _allergy, _policy

    monkeypatch.delenv("ANTHROPIC_API_KEY")
    _seed(run_env, [_allergy("b-0", "I am allergic to peanuts", 1),
                    _allergy("b-1", "I am allergic to peanuts.", 3),
                    _allergy("b-2", "I am allergic to peanuts.", 6)])  # fmt: skip
    out = run_local(RunConfig(dry_run=False, now=NIGHT, policy=str(_policy(tmp_path, 2))))
    state = _state(run_env)
    assert {i: state[i].status.value for i in ("b-0", "b-1", "b-2")} == dict.fromkeys(
        ("b-0", "b-1", "b-2"), "superseded"
    ), out.as_json()["other_counts"]


# -- a night's delete against a row written again (stores/sqlite.delete_many, audit 53h) ----
def _written_again(tmp_path: Path, **update: Any) -> tuple[Any, Any, Any]:
    """The 53h item past its deadline, read by the night; then written again by another
    connection with ``update`` (the same text, actor and namespace)."""
    from memlife.stores.sqlite import SqliteStore
    from tests.unit.test_sqlite_delete_race_session53h import RID, _stored

    store, was = _stored(tmp_path / "m.db", "expired")
    with SqliteStore(tmp_path / "m.db") as other:
        other.put_many([was.model_copy(update=update)])
    return store, was, RID


@pytest.mark.parametrize(
    "change",
    ["a_new_deadline", "created_again", "another_memory_type"],
)
def test_a_night_delete_keeps_a_row_whose_lifetime_changed_since_the_read(
    tmp_path: Path, change: str
) -> None:
    """stores/sqlite._SAME_LIFE with one of its columns left out (``expires_ts``,
    ``created_ts``, ``memory_type``: each ``(col=? OR 1)``): the agent's write of the same
    text after the night read the row (a put with a ttl: a deadline ahead; a new item:
    created now; a type whose lifetime is another) was deleted as the expiry of the row
    read, and receipted so."""
    from datetime import UTC, datetime, timedelta

    now = datetime.now(UTC)
    updates: dict[str, dict[str, Any]] = {
        "a_new_deadline": {"expires_at": now + timedelta(days=30)},
        "created_again": {"created_at": now - timedelta(days=1)},
        "another_memory_type": {"memory_type": "episodic"},
    }
    store, was, rid = _written_again(tmp_path, **updates[change])
    with store:
        res = store.delete_many([rid], expect={rid: was})
        assert [f.code for f in res.failed] == ["STALE_PRECONDITION"], res
        assert res.succeeded == [] and store.get(rid) is not None


def test_a_night_delete_keeps_a_row_whose_stored_time_cannot_be_read(tmp_path: Path) -> None:
    """stores/sqlite._same_life, ``except (TypeError, ValueError): return False`` -> True:
    a row whose time text no longer reads (edited by another tool) was taken for the row
    read and deleted; a value that cannot be read is a change."""
    from tests.unit.test_sqlite_delete_race_session53h import _stored

    store, was = _stored(tmp_path / "m.db", "expired")
    with store:
        store.connection.execute(
            "UPDATE records SET created_at='not a time', created_ts=created_ts+1 WHERE id=?",
            (was.id,),
        )
        res = store.delete_many([was.id], expect={was.id: was})
        assert [f.code for f in res.failed] == ["STALE_PRECONDITION"], res


def test_a_lock_met_paging_a_shard_is_no_damage() -> None:
    """stores/sqlite._damaged, the OperationalError pass-through dropped: a lock or a full
    disk met while paging was reported as a damaged store (restore it from a backup) and
    exit 2, where it is a transient error to retry."""
    import sqlite3

    from memlife.errors import NotAStoreError
    from memlife.stores.sqlite import _damaged

    lock = sqlite3.OperationalError("database is locked")
    assert _damaged(Path("m.db"), lock, "u-1", "/n") is lock
    damage = _damaged(Path("m.db"), sqlite3.DatabaseError("database disk image is malformed"),
                      "u-1", "/n")  # fmt: skip
    assert isinstance(damage, NotAStoreError) and "u-1" in str(damage)


# -- an operation id met in another scope (apply/executor.Executor.plan, audit 53f) ---------
def test_a_rerun_deletes_the_same_actors_record_that_took_the_id_in_another_namespace(
    home: Path,
) -> None:
    """apply/executor._scope without the namespace: the removed record's id taken, before
    the rerun, by the same actor's record in another namespace; the rerun took the removed
    record's done operation for its own and skipped the new one (not deleted, in no count)."""
    from datetime import timedelta

    from memlife.apply import Tally
    from memlife.apply.deletions import DeleteItem
    from tests.unit.test_journal_session53f import _first_attempt_deleted
    from tests.unit.test_ops_engine import T0, executor, rec

    store, sink = _first_attempt_deleted(home)
    try:
        b = rec("m-1", actor_id="u-1", namespace="/users/u-1/notes", content="Other.",
                expires_at=T0 - timedelta(days=1))  # fmt: skip
        store.put_many([b])
        t = Tally()
        executor(store, sink, T0).delete(
            [DeleteItem(b.id, b.actor_id, b.namespace, ("HARD_EXPIRED",), b.sha256)], t
        )
        assert store.get("m-1") is None and t.counts["deleted"] == 1
    finally:
        store.close()


# -- review show's token (review_queue/seen.py, resolving --seen) ---------------------------
def test_the_seen_token_covers_the_pair_and_a_pasted_token_is_trimmed(home: Path) -> None:
    """review_queue/seen.seen_token over the record only (the pair left out): a night that
    renewed the pair's text (the replacement a reviewer is asked to weigh the record
    against) let a decision land on a pair nobody read. And resolving's ``seen.strip()``
    -> ``seen``: the token as a terminal pastes it (a newline) was refused."""
    from types import SimpleNamespace

    from memlife.model import content_sha256
    from memlife.review_queue import resolve
    from memlife.review_queue.seen import seen_token
    from memlife.review_queue.show import show
    from tests.unit.test_review_seen_session53 import T0 as S0
    from tests.unit.test_review_seen_session53 import _store_with_item

    store, iid = _store_with_item(home)
    try:
        m1 = store.get("m-1")
        assert m1 is not None
        pair = m1.model_copy(update={"id": "m-2", "content": "Works in Lisbon."})
        store.put_many([pair.model_copy(update={"provenance": pair.provenance.model_copy(
            update={"content_sha256": content_sha256("Works in Lisbon.")})})])  # fmt: skip
        item = SimpleNamespace(record_id="m-1", pair_id="m-2", actor_id="u-1",
                               namespace=m1.namespace)  # fmt: skip
        before = seen_token(store, item)  # type: ignore[arg-type]
        assert seen_token(store, item) == before  # type: ignore[arg-type]
        again = store.get("m-2").model_copy(update={"content": "Works in Porto."})  # type: ignore[union-attr]
        store.put_many([again.model_copy(update={"provenance": again.provenance.model_copy(
            update={"content_sha256": content_sha256("Works in Porto.")})})])  # fmt: skip
        assert seen_token(store, item) != before  # type: ignore[arg-type]
        token = show(store, iid)["seen"]
        resolve(store, iid, "delete", "eve@example.com", seen=f" {token}\n", now=S0)
        assert store.get("m-1") is None
    finally:
        store.close()


# -- a refused field's place (errors.field_place, audit 53cl) -------------------------------
def test_a_long_key_of_plain_letters_is_not_named_by_its_text() -> None:
    """errors.field_place, ``{0,40}`` -> ``*``: a key of plain letters past 41 characters
    (a fact written as one word, ``my_bank_pin_is_4921_and_the_safe_code_is_7730``) went
    into the error as it is."""
    from memlife.errors import field_place

    fact = "my_bank_pin_is_4921_and_the_safe_code_is_7730"
    assert len(fact) > 41
    assert field_place(["provenance", fact]) == "provenance.<key>"
    assert field_place(["provenance", "origin", 3]) == "provenance.origin.3"
    assert field_place(["x" * 41]) == "x" * 41  # the bound: a short plain name as it is


# -- a shard's paging (stores/base.iter_shard, audit 53ii) ----------------------------------
class _CyclingStore:
    """A store whose service hands back a page token it gave before (t1, t2, t1, ...):
    only ``page``, which is all iter_shard asks; it stops the test after 20 pages."""

    def __init__(self) -> None:
        self.calls = 0

    def page(self, actor_id: str, namespace: str, *, page_size: int, token: str | None,
             statuses: Any = None) -> Any:  # fmt: skip
        from memlife.stores.base import Page
        from tests.unit.test_ops_engine import rec

        self.calls += 1
        if self.calls > 20:
            raise AssertionError("paged for ever")
        nxt = {None: "t1", "t1": "t2", "t2": "t1"}[token]
        return Page([rec(f"m-{self.calls}")], nxt)


def test_a_page_token_handed_out_before_stops_the_paging() -> None:
    """stores/base.iter_shard, ``if page.next_token in tokens`` dropped (or the tokens
    never kept): a store that hands back an earlier token paged for ever. The AgentCore
    store refuses such a cursor itself (so the session's test passed without this check);
    any other store of the protocol reaches only this one."""
    from memlife.stores.base import StoreError, iter_shard

    store = _CyclingStore()
    with pytest.raises(StoreError, match="page token it gave before"):
        for _ in iter_shard(store, "u-1", "/n", page_size=1):  # type: ignore[arg-type]
            pass
    assert store.calls == 3


# -- receipts verify: what explains a record missing (review._removed_later, audit 53t) ----
def _hold_vanish_then(home: Path, *, before: str | None, after: str | None) -> list[Any]:
    """u-1's m-1 held (a receipted run), then gone with no receipt; ``before`` / ``after``
    the hold, an actor's own m-1 erased (receipted): the codes verify gives the hold's run."""
    from memlife.audit import FileSink
    from memlife.erase import erase
    from memlife.holds import place_hold
    from memlife.journal import open_journal
    from memlife.review import verify_run
    from memlife.stores.sqlite import SqliteStore
    from tests.unit.test_verify_scope_session53t import _record

    receipts = f"file://{home / 'receipts'}"
    store = SqliteStore(home / "memlife.db")
    try:
        if before is not None:
            store.put_many([_record(before, "Lives in Lisbon.")])
            assert erase(store, before, ids=["m-1"], receipts=receipts)["erased"] == ["m-1"]
        store.put_many([_record("u-1", "Drinks only green tea.")])
        run_id = place_hold(store, ids=["m-1"], actor="u-1", receipts=receipts)["run_id"]
        with store.lock:  # no receipt, no journal row: the record is simply gone
            store.connection.execute("DELETE FROM records WHERE id = ?", ("m-1",))
            store.connection.commit()
        if after is not None:
            store.put_many([_record(after, "Lives in Porto.")])
            assert erase(store, after, ids=["m-1"], receipts=receipts)["erased"] == ["m-1"]
        v = verify_run(FileSink(home / "receipts"), store, open_journal(store), run_id)
        return [p["code"] for p in v.problems]
    finally:
        store.close()


def test_another_actors_later_erasure_of_the_id_is_no_receipt_for_this_record(
    home: Path,
) -> None:
    """review._removed_later without the actor and namespace: u-2's erasure of its own m-1,
    after u-1's held m-1 vanished, passed for the held record's removal (verify ok)."""
    assert "RECORD_MISSING_WITHOUT_RECEIPT" in _hold_vanish_then(home, before=None, after="u-2")


def test_the_same_actors_earlier_erasure_of_the_id_is_no_receipt_for_this_record(
    home: Path,
) -> None:
    """review._removed_later without ``updated_at >= since`` (or ``since`` None): u-1's
    erasure of an earlier m-1, before the hold on its new m-1, passed for its removal."""
    assert "RECORD_MISSING_WITHOUT_RECEIPT" in _hold_vanish_then(home, before="u-1", after=None)


# -- a rerun's verdict (run_commit.under_kept, audit 53gr) ----------------------------------
class _NoStore:  # nothing to snapshot: every held record is absent
    def get(self, rid: str) -> None:
        return None


def _verdicts() -> tuple[list[Any], list[Any], dict[str, Any]]:
    from memlife.apply import DeleteItem

    items = [DeleteItem(f"m-{a}", a, f"/users/{a}/facts", ("LOW_SCORE",), None) for a in "ab"]
    outcomes: list[Any] = [type("O", (), {"deletions": items, "staged": []})()]
    passing = {"configured": True, "blocked": False, "deletions_blocked": False,
               "supersedes_blocked": False, "uncovered": {"deletions": [], "groups": []},
               "blocking_groups": ["g-own"], "eval_digest": "d1"}  # fmt: skip
    return items, outcomes, passing


def test_a_rerun_holds_the_groups_the_nights_gate_held(home: Path) -> None:
    """run_commit.under_kept: ``any(groups_blocked(...))`` -> ``all``: the night's gate held
    every staged group back (a failed case blamed a supersede), the rerun's own passed, and
    the rerun superseded them. And ``out["blocked"]`` without the verdicts' own flag: a
    blocked verdict read as passing."""
    from memlife.run_commit import groups_blocked, under_kept

    _, outcomes, passing = _verdicts()
    kept = {**passing, "blocked": True, "supersedes_blocked": True, "blocking_groups": ["g-1"]}
    out = under_kept(_NoStore(), outcomes, passing, kept)  # type: ignore[arg-type]
    assert groups_blocked(out) and out["supersedes_blocked"] and out["blocked"]
    assert not out["deletions_blocked"]
    flagged = {**passing, "blocked": True}  # blocked, by neither part (a verdict's own flag)
    assert under_kept(_NoStore(), outcomes, passing, flagged)["blocked"]  # type: ignore[arg-type]


def test_a_kept_verdict_of_before_the_split_holds_the_deletions(home: Path) -> None:
    """run_commit._dels_blocked without the ``blocked`` fallback: a night's kept verdict
    written before ``deletions_blocked`` existed (``blocked`` alone, an upgrade between the
    crash and the rerun) held nothing back, and the rerun deleted what it had blocked."""
    from memlife.run_commit import held_deletions, under_kept

    items, outcomes, passing = _verdicts()
    old = {"configured": True, "blocked": True, "eval_digest": "d1"}
    out = under_kept(_NoStore(), outcomes, passing, old)  # type: ignore[arg-type]
    assert out["deletions_blocked"] and {i.id for i in held_deletions(out, items)} == {"m-a", "m-b"}


def test_the_kept_verdicts_blocked_groups_count_only_for_the_same_set(home: Path) -> None:
    """run_commit.under_kept, ``same = kept digest == own digest`` -> True / False: the
    memo of a blocked group is keyed by the set that blocked it, so the night's names are
    joined to the rerun's for the same set and never for another."""
    from memlife.run_commit import under_kept

    _, outcomes, passing = _verdicts()
    kept = {**passing, "blocking_groups": ["g-night"]}
    same = under_kept(_NoStore(), outcomes, passing, kept)  # type: ignore[arg-type]
    assert same["blocking_groups"] == ["g-night", "g-own"]
    other = under_kept(_NoStore(), outcomes, passing,  # type: ignore[arg-type]
                       {**kept, "eval_digest": "d0"})  # fmt: skip
    assert other["blocking_groups"] == ["g-own"]
