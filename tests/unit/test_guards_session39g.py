"""Guards left untested by the thirty-ninth audit (session 39, g): an adversarial review of
this session's changes (erase._source_of, tombstones.erased_times/erased_id/refusal, the
SQLite and DynamoDB second tombstone names, the group take-back, the online hand-over,
the consolidator's outage streak)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.erase import erase
from memlife.model import Status, content_sha256, utcnow
from memlife.stores.sqlite import SqliteStore, erased_again
from tests.unit.test_erase import NOW, rec
from tests.unit.test_guards_session37d import aws  # noqa: F401 (fixture)

LATER = NOW + timedelta(hours=1)


def test_erasing_a_second_level_replacement_takes_the_sources_handed_over_to_it(
    tmp_path: Path,
) -> None:
    """Attacks ``_source_of`` in ``memlife/erase.py`` (``r.id in target.provenance.
    supersedes``). Night 1 consolidates s1 and s2 into X; night 2 consolidates X with z into
    Y and hands s1 and s2 over to Y (``status._repoint``: a superseded record never points
    to a superseded one). Y's ``supersedes`` lists X and z, not s1 and s2. Erasing Y erases
    X and z (SOURCE_OF_ERASED) but reactivates s1 and s2: their claims are Y's (through X),
    the very text the user asked to erase comes back active. Before this session every
    record superseded by an erased record went with it."""
    store = SqliteStore(tmp_path / "memlife.db")
    try:
        sup = Status.superseded
        store.put_many([
            rec("s1", "Works at Acme as a welder.", status=sup, replaced_by="Y"),
            rec("s2", "Welds pipes at Acme since 2019.", status=sup, replaced_by="Y"),
            rec("X", "Welder at Acme since 2019.", status=sup, replaced_by="Y",
                supersedes=("s1", "s2")),
            rec("z", "Lives near the Acme plant.", status=sup, replaced_by="Y"),
            rec("Y", "Acme welder since 2019, living near the plant.", supersedes=("X", "z")),
            rec("k", "Drinks green tea."),
        ])  # fmt: skip
        result = erase(store, "u-1", ids=["Y"], now=NOW)
        assert {"Y", "X", "z"} <= set(result["erased"])
        assert store.get("k") is not None
        assert store.get("s1") is None and store.get("s2") is None, result["erased"]
    finally:
        store.close()


def _ledger_ids(tmp_path: Path, store: SqliteStore, reads: list[tuple[str, datetime]]) -> list[str]:
    from memlife.ledger import AccessLedger

    ledger = AccessLedger(tmp_path / "ledger", flush_seconds=None)
    ledger.watch_erasures(store)
    for rid, at in reads:
        ledger.append("u-1", "/users/u-1/facts", rid, at=at)
    ledger.flush()
    return sorted(ledger.read().column("record_id").to_pylist())


def test_a_read_stamped_after_an_erasure_of_an_unreused_id_is_dropped(tmp_path: Path) -> None:
    """Attacks ``r.accessed_at <= at`` in ``memlife/ledger_ingest.py::write_checked``. An
    erasure commits its tombstones first and deletes after (``erase``: "tombstones are
    committed BEFORE the final selection"); between the two the record is still served,
    and ``recall`` stamps its reads after the search (an AgentCore delete, throttled and
    retried, makes the window long; a host whose clock is ahead does the same). Such a
    read of the ERASED 'x' is stamped after the tombstone's ``erased_at``; no record took
    'x' since, yet the read is written to the ledger and kept (before this session every
    read of an erased id was dropped): the erased record's access history survives."""
    from memlife import tombstones

    store = SqliteStore(tmp_path / "memlife.db")
    try:
        x = rec("x", "Lives in Lisbon.")
        store.put_many([x, rec("y", "Drinks green tea.")])
        assert tombstones.add(store, [x]) == 1  # the erasure's first step
        served = utcnow()  # a recall of x, still in the store, stamps its read
        assert store.get("x") is not None
        assert erase(store, "u-1", ids=["x"], now=NOW)["erased"] == ["x"]  # the delete
        assert store.get("x") is None  # nobody took the id since
        assert _ledger_ids(tmp_path, store, [("x", served), ("y", served)]) == ["y"]
    finally:
        store.close()


def test_a_naive_access_time_of_an_erased_id_does_not_wedge_the_ledger(tmp_path: Path) -> None:
    """Attacks ``r.accessed_at <= at`` in ``memlife/ledger_ingest.py::write_checked``
    (``tombstones._when`` makes the tombstone's time aware, the row's is not). An
    ``Access`` given to the public ``AccessLedger.extend`` with a naive time was written
    before (``by_day`` and the table read it as UTC); now, once its id is erased, the
    comparison raises TypeError, ``flush`` puts the rows back, and no read is ever written."""
    from memlife.ledger import Access, AccessLedger

    store = SqliteStore(tmp_path / "memlife.db")
    try:
        store.put_many([rec("x", "Lives in Lisbon."), rec("y", "Drinks green tea.")])
        assert erase(store, "u-1", ids=["x"], now=NOW)["erased"] == ["x"]
        ledger = AccessLedger(tmp_path / "ledger", flush_seconds=None)
        ledger.watch_erasures(store)
        naive = datetime(2020, 1, 1, 12, 0)  # long before the erasure
        ledger.extend([Access("u-1", "/users/u-1/facts", rid, naive) for rid in ("x", "y")])
        ledger.flush()
        assert ledger.read().column("record_id").to_pylist() == ["y"]
    finally:
        store.close()


def test_a_source_of_a_replacement_erased_earlier_goes_when_the_plan_is_redone(
    tmp_path: Path,
) -> None:
    """Attacks ``target is None or`` in ``memlife/erase.py::_source_of``: Y was erased
    (its tombstone stands) while its source s was under a hold, so s was deferred; once the
    hold is gone the plan is redone from the tombstones (``erased_earlier``). Y is gone
    from the store: its ``supersedes`` are unknown, and s, superseded by it, holds its
    claims. It must go as SOURCE_OF_ERASED, never be reactivated."""
    from memlife import tombstones
    from memlife.erase import plan_erasure

    store = SqliteStore(tmp_path / "memlife.db")
    try:
        store.put_many([
            rec("s", "Works at Acme as a welder.", status=Status.superseded, replaced_by="Y"),
            rec("k", "Drinks green tea."),
        ])  # fmt: skip
        assert tombstones.add(store, [rec("Y", "Acme welder, since 2019.", supersedes=("s",))])
        plan = plan_erasure(store, "u-1", erased_earlier=True)
        assert plan.why.get("s") == "SOURCE_OF_ERASED", plan.why
        assert [r.id for r in plan.reactivate] == []
    finally:
        store.close()


def test_an_id_ending_in_recorded_is_its_own_when_its_base_was_never_erased() -> None:
    """Attacks ``base not in names`` in ``memlife/tombstones.py::erased_id``: the importer
    accepts '#' in ids; a record 'm#recorded' erased alone is tombstoned under its own
    name, and no 'm' was ever erased: the name is the id, not 'm#recorded' read as the
    second hash of an 'm' (the ledger would keep every read of the erased record)."""
    from memlife.tombstones import erased_id

    assert erased_id("m#recorded", "ab" * 32, {"m#recorded"}) == "m#recorded"
    assert erased_id("m#recorded", "ab" * 32, {"m", "m#recorded"}) == "m"


def test_the_reads_of_an_erased_record_named_like_a_second_hash_are_dropped(
    tmp_path: Path,
) -> None:
    """Attacks ``tail != "recorded"`` in ``memlife/tombstones.py::erased_id`` (read by
    ``erased_times`` for the ledger). u-1 holds 'm' and 'm#recorded' (an importer id) and
    erases both. Each is tombstoned under its own name; reading the names back, the second
    is taken for 'm's recorded hash (its base is a tombstone name), so the pair
    (u-1, 'm#recorded') is never erased for the ledger: its reads from before the erasure
    are written and kept (before this session the raw names were compared)."""
    store = SqliteStore(tmp_path / "memlife.db")
    try:
        store.put_many([
            rec("m", "Lives in Lisbon."), rec("m#recorded", "Owns a red bicycle."),
            rec("y", "Drinks green tea."),
        ])  # fmt: skip
        before = utcnow() - timedelta(days=1)
        assert sorted(erase(store, "u-1", ids=["m", "m#recorded"], now=NOW)["erased"]) == [
            "m", "m#recorded",
        ]  # fmt: skip
        reads = [("m", before), ("m#recorded", before), ("y", before)]
        assert _ledger_ids(tmp_path, store, reads) == ["y"]
    finally:
        store.close()


def test_a_reused_id_is_a_source_where_tombstones_live_in_the_homes_file(home: Path) -> None:
    """Attacks ``backend is store`` and the per-source ``continue`` in
    ``memlife/tombstones.py::refusal``. A store without a SQLite file of its own keeps its
    tombstones in $MEMLIFE_HOME/tombstones.db, a SqliteStore with no records: its own
    query cannot see the reused 'x' (its NOT EXISTS finds no record), so the store's
    record must be read. And the sources are checked one by one: a clean 'y' listed first
    is no pass for the erased 'z' after it."""
    from memlife import tombstones
    from tests.unit.test_guards_session39e import _RemoteWithRecords

    erased = rec("x", "Lives in Lisbon.")
    empty: Any = _RemoteWithRecords()
    assert tombstones.add(empty, [erased, rec("z", "Plays the cello.")]) == 2
    # the id taken again after its erasure (a record dated before it is the erased record
    # itself under an older text, refused since audit 49vi)
    again = rec("x", "Owns a red bicycle.").model_copy(update={"created_at": utcnow()})
    reused: Any = _RemoteWithRecords(again, rec("y", "Rides daily."))
    assert tombstones.refusal(reused, rec("r", "Rides a red bike.", supersedes=("y", "x"))) is None
    both = rec("r", "Rides a red bike.", supersedes=("y", "z"))
    assert tombstones.refusal(reused, both) == "ERASED_SOURCE"
    window: Any = _RemoteWithRecords(erased, rec("y", "Rides daily."))
    assert tombstones.refusal(window, rec("r", "Rides.", supersedes=("y", "x"))) == (
        "ERASED_SOURCE"
    )


def test_a_read_between_two_erasures_of_one_id_is_dropped(tmp_path: Path) -> None:
    """Attacks ``at > erased[pair]`` in ``memlife/tombstones.py::erased_times`` (the LAST
    erasure of an id bounds the reads dropped): 'x' is erased, reused, read, and erased
    again. The read between the two erasures is the second erased record's: dropped, as
    is one stamped exactly at the last erasure (``<=`` in ``ledger_ingest.write_checked``)."""
    from memlife import tombstones

    store = SqliteStore(tmp_path / "memlife.db")
    try:
        store.put_many([rec("x", "Lives in Lisbon."), rec("y", "Drinks green tea.")])
        assert erase(store, "u-1", ids=["x"], now=NOW)["erased"] == ["x"]
        assert store.put_many([rec("x", "Owns a red bicycle.")]).succeeded == ["x"]
        between = utcnow()
        assert erase(store, "u-1", ids=["x"], now=LATER)["erased"] == ["x"]
        last = max(datetime.fromisoformat(str(t["erased_at"])) for t in tombstones.listing(store))
        assert between <= last
        reads = [("x", between), ("x", last), ("y", between)]
        assert _ledger_ids(tmp_path, store, reads) == ["y"]
    finally:
        store.close()


def test_an_unreadable_erasure_time_drops_every_read_of_its_id() -> None:
    """Attacks ``datetime.max`` in ``memlife/tombstones.py::_when``: a tombstone whose
    ``erased_at`` cannot be read (a hand-edited state item) bounds nothing it can prove,
    so every read of its id is dropped (the safe side), and a naive time is read as UTC."""
    from memlife.tombstones import _when

    assert _when("not a time") == datetime.max.replace(tzinfo=UTC)
    assert _when(None) == datetime.max.replace(tzinfo=UTC)
    assert _when("2026-06-01T00:00:00") == NOW


def test_another_actors_record_under_an_erased_id_is_no_source_on_sqlite(tmp_path: Path) -> None:
    """Attacks ``r.actor_id=t.actor_id`` in the NOT EXISTS of ``memlife/stores/sqlite.py::
    _tombstone_refusal``: u-1's 'x' is erased and u-2 takes the id with a text of its
    own. A u-1 replacement naming 'x' as a source names u-1's erased record (u-2's is
    not u-1's to consolidate): still ERASED_SOURCE; u-1's own reuse is a source."""
    store = SqliteStore(tmp_path / "memlife.db")
    try:
        store.put_many([rec("x", "Lives in Lisbon."), rec("y", "Drinks green tea.")])
        assert erase(store, "u-1", ids=["x"], now=NOW)["erased"] == ["x"]
        assert store.put_many([rec("x", "Owns a red bicycle.", actor="u-2")]).succeeded == ["x"]
        repl = rec("r", "Drinks tea, rides a bike.", supersedes=("y", "x"))
        assert store.tombstone_refusal(repl, repl.provenance.supersedes) == "ERASED_SOURCE"
        assert store.put_replacement(repl).failed[0].code == "ERASED_SOURCE"
        store.delete_many(["x"])
        assert store.put_many([rec("x", "Owns a red bicycle.")]).succeeded == ["x"]
        assert store.tombstone_refusal(repl, repl.provenance.supersedes) is None
    finally:
        store.close()


def test_a_refused_conditional_delete_says_why_it_deleted_nothing(tmp_path: Path) -> None:
    """Attacks ``changed or "LEGAL_HOLD"`` and ``if now is None`` in ``memlife/stores/
    sqlite.py::delete_many``: a delete tied to the record as read deletes nothing when the
    row was rewritten (STALE_PRECONDITION) or taken by another actor (SCOPE_CHANGED) since;
    neither is a hold. A row gone is missing; a held row is LEGAL_HOLD."""
    from memlife.model import RetentionClass

    store = SqliteStore(tmp_path / "memlife.db")
    try:
        store.put_many([rec("a", "Lives in Lisbon."), rec("b", "Drinks tea.", actor="u-2"),
                        rec("h", "Plays chess.", retention=RetentionClass.legal_hold)])  # fmt: skip
        expect = {"a": rec("a", "Lived in Porto."), "b": rec("b", "Drinks tea."),
                  "h": rec("h", "Plays chess."), "g": rec("g", "Gone.")}  # fmt: skip
        out = store.delete_many(["a", "b", "h", "g"], expect=expect)
        codes = {f.id: f.code for f in out.failed}
        assert codes == {"a": "STALE_PRECONDITION", "b": "SCOPE_CHANGED", "h": "LEGAL_HOLD"}
        assert out.missing == ["g"] and not out.succeeded
        assert store.get("a") is not None and store.get("b") is not None
    finally:
        store.close()


@pytest.mark.usefixtures("aws")
def test_a_taken_second_name_is_extended_again_on_dynamodb() -> None:
    """Attacks ``erased_again(name, sha)`` (not ``(rid, sha)``) in ``memlife/state/side.py::
    DynamoTombstones.add_tombstones``: u-1's 'x' (T1) and a record named
    ``erased_again('x', sha(T2))`` (T3) are tombstoned; u-1's reused 'x' with T2 is erased
    in its turn. Both names are taken by other texts: T2 goes under the name extended
    again and is listed (and counted), so the listing, the erasures file and the erased-
    text checks that read it keep all three texts."""
    from memlife import tombstones
    from tests.unit.test_guards_session37d import _rec, _RemoteStore

    second = "Owns a red bicycle."
    named = erased_again("x", content_sha256(second))
    store: Any = _RemoteStore()
    assert tombstones.add(store, [_rec("x", "Lives in Lisbon."), _rec(named, "Plays cello.")]) == 2
    assert tombstones.add(store, [_rec("x", second)]) == 1
    assert tombstones.add(store, [_rec("x", second)]) == 0
    rows = {str(t["record_id"]): str(t["content_sha256"]) for t in tombstones.listing(store)}
    assert rows.get(erased_again(named, content_sha256(second))) == content_sha256(second), rows


def test_online_hand_over_keeps_each_followers_status_time_on_agentcore(home: Path) -> None:
    """Attacks ``at=at`` in the unguarded branch of ``memlife/online/memory.py::
    _write_status`` (stores without ``set_status_unless_held``: AgentCore). A, superseded
    80 days ago under B, moves to C when B is superseded online: a move is no new
    supersede, so A keeps its status time (superseded retention counts from it)."""
    from tests.fakes.agentcore import AgentCoreHarness
    from tests.unit.test_guards_session39c import chain, online, pointing, stored

    harness = AgentCoreHarness()
    try:
        store = harness.store()
        since = utcnow().replace(microsecond=0) - timedelta(days=80)
        store.put_many(chain(pointing("A", "B", status_changed_at=since)))
        mem = online(store, home)
        try:
            assert mem.set_status(["B"], Status.superseded, replaced_by="C") == ["B"]
        finally:
            mem.close()
        a = stored(store, "A")
        assert (a.provenance.replaced_by, a.status_changed_at) == ("C", since)
    finally:
        harness.close()


def test_a_subject_and_object_traded_when_one_is_a_list_is_another_statement() -> None:
    """Attacks the clause-ends pairs (``ends``) in ``memlife/restate.py::_shape`` (session
    39: "dogs chase cats" is not "cats chase dogs"). With a list on one side the ends
    differ ('cats'..'mice' / 'mice'..'dogs'), so no pair stands swapped: "cats and dogs
    hate mice" restates "mice hate cats and dogs", and an online ``remember`` of the second
    refreshes the first (the user is told the new fact is kept; who hates whom is lost)."""
    from memlife.restate import restates

    assert not restates("dogs chase cats", "cats chase dogs")  # the rule as written
    assert not restates("cats and dogs hate mice", "mice hate cats and dogs")
    assert not restates("wolves hunt deer and elk", "deer and elk hunt wolves")
