"""Guards left untested by the thirty-ninth audit (session 39e): erasure tombstones and
what reads them (an id erased twice, ids holding '#', the erasures export, the ledger).
Four real bugs fixed in session 39."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife import tombstones
from memlife.erase import erase, pending_erasures, release_hold
from memlife.model import RetentionClass, Status, content_sha256, utcnow
from memlife.stores.sqlite import SqliteStore, erased_again
from tests.unit.test_erase import NOW, rec
from tests.unit.test_guards_session37d import _rec, _RemoteStore, aws  # noqa: F401 (fixture)

LATER = NOW + timedelta(hours=1)


def _pinned(a: str) -> list[Any]:
    """``a`` and the held m-b consolidated into r-1 (model text of both)."""
    return [
        rec(a, "Takes lithium every day.", subject="meds", status=Status.superseded,
            replaced_by="r-1"),
        rec("m-b", "Takes vitamin D daily.", subject="meds", status=Status.superseded,
            replaced_by="r-1", retention=RetentionClass.legal_hold),
        rec("r-1", "Takes lithium and vitamin D every day.", subject="meds",
            supersedes=(a, "m-b"), age=10),
    ]  # fmt: skip


@pytest.mark.parametrize("a", ["m-a", "m#a"])
def test_releasing_a_pinning_hold_withdraws_a_replacement_of_an_erased_hash_id(
    home: Path, a: str
) -> None:
    """Attacks ``str(t["record_id"]).split("#", 1)[0]`` in ``memlife/erase.py::
    _erased_keys``: u-1 erases ``a`` (an id the importer accepts may hold '#'); r-1, model
    text of ``a`` and the held m-b, is deferred with m-b's hold. Releasing m-b must
    withdraw r-1 (it carries the erased claim) as it does for an id without '#'."""
    store = SqliteStore(home / "memlife.db")
    try:
        store.put_many(_pinned(a))
        assert erase(store, "u-1", ids=[a], now=NOW)["deferred"] == ["r-1"]
        out = release_hold(store, ["m-b"], now=NOW)
        assert [e["erased"] for e in out["erasures"]] == [["r-1"]]
        assert store.get("r-1") is None and pending_erasures(store) == []
    finally:
        store.close()


def test_a_second_text_is_tombstoned_when_its_second_name_is_an_erased_records_id(
    tmp_path: Path,
) -> None:
    """Attacks ``INSERT OR IGNORE`` of ``erased_again(rid, sha)`` in ``memlife/stores/
    sqlite.py::add_tombstones``: u-1 erases 'x' and a record whose id (the importer accepts
    '#') is ``erased_again('x', sha(T2))``; u-1 reuses 'x' with T2 and erases it. T2's
    tombstone goes under that taken name and is ignored: T2 may be written back."""
    second = "Owns a red bicycle."
    named = erased_again("x", content_sha256(second))
    store = SqliteStore(tmp_path / "memlife.db")
    try:
        store.put_many([rec("x", "Lives in Lisbon."), rec(named, "Plays the cello.")])
        assert sorted(erase(store, "u-1", ids=["x", named], now=NOW)["erased"]) == ["x", named]
        assert store.put_many([rec("x", second)]).succeeded == ["x"]
        assert erase(store, "u-1", ids=["x"], now=LATER)["erased"] == ["x"]
        assert store.tombstone_refusal(rec("y", second)) == "ERASED_CONTENT"
    finally:
        store.close()


def test_reads_of_a_record_that_reused_an_erased_id_reach_the_ledger(tmp_path: Path) -> None:
    """Attacks ``erased_times`` in ``memlife/tombstones.py`` (read by ``ledger_ingest.
    write_checked``): u-1's 'x' is erased, u-1 writes a new 'x' (allowed) and reads it
    three days later. A read of the erased 'x' (before its erasure) is dropped; the new
    record's later read is kept (the tombstone named the id, not the time: every later read
    was dropped as the erased record's, so the new one was scored as never read)."""
    from memlife.ledger import AccessLedger
    from memlife.model import utcnow

    store = SqliteStore(tmp_path / "memlife.db")
    try:
        store.put_many([rec("x", "Lives in Lisbon."), rec("y", "Drinks green tea.")])
        before = utcnow() - timedelta(days=1)
        assert erase(store, "u-1", ids=["x"], now=NOW)["erased"] == ["x"]
        # taken again after the erasure (dated before it, it is the erased record itself
        # under an older text: refused since audit 49vi)
        again = rec("x", "Owns a red bicycle.").model_copy(update={"created_at": utcnow()})
        assert store.put_many([again]).succeeded == ["x"]
        ledger = AccessLedger(tmp_path / "ledger", flush_seconds=None)
        ledger.watch_erasures(store)
        later = utcnow() + timedelta(days=3)
        ledger.append("u-1", "facts", "x", at=before)  # the erased record's read
        for rid in ("x", "y"):
            ledger.append("u-1", "facts", rid, at=later)
        ledger.flush()
        table = ledger.read()
        rows = sorted(zip(table.column("record_id").to_pylist(),
                          table.column("accessed_at").to_pylist(), strict=True))  # fmt: skip
        assert [r for r, _ in rows] == ["x", "y"]
        assert all(at >= later - timedelta(seconds=1) for _, at in rows), rows
    finally:
        store.close()


TEXTS = ("Lives in Lisbon.", "Owns a red bicycle.", "Plays the cello.")


def _three_erasures(store: Any) -> None:
    """'x' erased with three texts, each added twice: the count says what is new."""
    for text in TEXTS:
        assert tombstones.add(store, [_rec("x", text)]) == 1, text
        assert tombstones.add(store, [_rec("x", text)]) == 0, text
    assert tombstones.add(store, [_rec("x", TEXTS[0])]) == 0
    rows = tombstones.listing(store, "u-1")
    assert sorted(str(r["content_sha256"]) for r in rows) == sorted(map(content_sha256, TEXTS))
    for text in TEXTS:
        assert tombstones.refusal(store, _rec("y", text)) == "ERASED_CONTENT", text


def test_three_texts_erased_under_one_id_are_three_counted_tombstones(tmp_path: Path) -> None:
    """Attacks ``new += 1``, ``new += ....rowcount`` in ``memlife/stores/sqlite.py::
    add_tombstones`` and the sha in ``erased_again``'s name: a third text erased under a
    reused id kept no row when the second name held only the id; a re-added tombstone
    counted as new (``memlife import --erasures`` reports ``tombstones_added``)."""
    store = SqliteStore(tmp_path / "memlife.db")
    try:
        _three_erasures(store)
    finally:
        store.close()


@pytest.mark.usefixtures("aws")
def test_three_texts_erased_under_one_id_are_three_counted_tombstones_on_dynamodb() -> None:
    """The same on the DynamoDB state (``DynamoTombstones.add_tombstones``)."""
    _three_erasures(_RemoteStore())


class _EmptyRemote(_RemoteStore):
    """A remote store with no records (the erasures file's live-text check reads them)."""

    def list_namespaces(self, actor_id: str) -> list[str]:
        return []


@pytest.mark.usefixtures("aws")
def test_an_id_erased_twice_round_trips_sqlite_dynamodb_sqlite(tmp_path: Path) -> None:
    """Attacks the second name in ``add_tombstones`` (SQLite and DynamoDB) as the erasures
    export carries it (``memlife/erasure_export.py``): u-1's 'x' erased, reused, erased
    again; its file applied to the DynamoDB state and back to a new SQLite store keeps
    both texts refused, each tombstone once (``tombstones_added``), and re-applying adds
    nothing."""
    from memlife.erasure_export import dump_erasures, load_erasures

    store = SqliteStore(tmp_path / "a.db")
    try:
        store.put_many([rec("x", TEXTS[0])])
        assert erase(store, "u-1", ids=["x"], now=NOW)["erased"] == ["x"]
        assert store.put_many([rec("x", TEXTS[1])]).succeeded == ["x"]
        assert erase(store, "u-1", ids=["x"], now=LATER)["erased"] == ["x"]
        lines = list(dump_erasures(store))
    finally:
        store.close()
    names = ["x", erased_again("x", content_sha256(TEXTS[1]))]
    remote: Any = _EmptyRemote()
    assert load_erasures(remote, lines)["tombstones_added"] == 2
    assert load_erasures(remote, lines)["tombstones_added"] == 0
    assert [t["record_id"] for t in tombstones.listing(remote, "u-1")] == names
    back = SqliteStore(tmp_path / "b.db")
    try:
        again = list(dump_erasures(remote))
        assert load_erasures(back, again)["tombstones_added"] == 2
        assert load_erasures(back, again)["tombstones_added"] == 0
        assert [t["record_id"] for t in tombstones.listing(back, "u-1")] == names
        for text in TEXTS[:2]:
            assert tombstones.refusal(back, _rec("y", text)) == "ERASED_CONTENT", text
    finally:
        back.close()


def test_a_store_without_a_file_of_its_own_refuses_erased_text_and_sources(home: Path) -> None:
    """Attacks ``if code is not None`` in ``memlife/tombstones.py::write_replacement`` and
    ``refusal(store, r) or`` in ``insert_new`` (the path of every store that is not
    SQLite: AgentCore, its tombstones in $MEMLIFE_HOME/tombstones.db): a remember of the
    erased text, and a replacement naming the erased id, are refused, nothing written."""
    from tests.fakes.agentcore import AgentCoreHarness

    harness = AgentCoreHarness()
    try:
        store = harness.store()
        erased = rec("x", TEXTS[0], ns="facts")
        assert tombstones.add(store, [erased]) == 1
        copy = rec("c-1", TEXTS[0], ns="facts")
        out = tombstones.insert_new(store, [copy])
        assert [f.code for f in out.failed] == ["ERASED_CONTENT"] and not out.succeeded
        repl = rec("r-1", TEXTS[1], ns="facts", supersedes=("x", "y"))
        out = tombstones.write_replacement(store, repl)
        assert [f.code for f in out.failed] == ["ERASED_SOURCE"] and not out.succeeded
        assert store.get("c-1") is None and store.get("r-1") is None
    finally:
        harness.close()


def _reads(tmp_path: Path, store: Any, *rows: tuple[str, str]) -> list[str]:
    """(actor, record id) reads three days after NOW through a ledger watching ``store``:
    the (actor, id) pairs written."""
    from memlife.ledger import AccessLedger

    ledger = AccessLedger(tmp_path / "ledger", flush_seconds=None)
    ledger.watch_erasures(store)
    for actor, rid in rows:
        ledger.append(actor, "facts", rid, at=NOW + timedelta(days=3))
    ledger.flush()
    table = ledger.read()
    actors, ids = table.column("actor_id").to_pylist(), table.column("record_id").to_pylist()
    pairs = zip(actors, ids, strict=True)
    return sorted(f"{a}/{r}" for a, r in pairs)


def test_another_actors_erasure_of_an_id_leaves_this_actors_reads(tmp_path: Path) -> None:
    """Attacks ``listing(store, actor)`` in ``memlife/tombstones.py::erased_times`` (the
    actor's own tombstones): u-2 erased its 'x'; u-1's live 'x' is another record, and
    its reads are written (tenants never mixed)."""
    store = SqliteStore(tmp_path / "memlife.db")
    try:
        store.put_many([rec("x", TEXTS[0], actor="u-2")])
        assert erase(store, "u-2", ids=["x"], now=NOW)["erased"] == ["x"]
        store.put_many([rec("x", TEXTS[1])])
        assert _reads(tmp_path, store, ("u-1", "x"), ("u-2", "x")) == ["u-1/x"]
    finally:
        store.close()


def test_a_closed_watched_store_stops_no_ledger_write(tmp_path: Path) -> None:
    """Attacks ``except Exception: break`` in ``memlife/tombstones.py::erased_times``: a
    store the ledger watches was closed (its erasures scrub what they see); the reads of
    the live records are written, not put back for ever behind an error."""
    store = SqliteStore(tmp_path / "memlife.db")
    store.put_many([rec("y", TEXTS[0])])
    store.close()
    assert _reads(tmp_path, store, ("u-1", "y")) == ["u-1/y"]


def test_a_long_id_erased_twice_is_exported_and_read_back(tmp_path: Path) -> None:
    """Attacks ``max_length=300`` of ``Tombstone.record_id`` in ``memlife/erasure_export.py``:
    a record id may be 256 characters; its second name (``erased_again``) and its
    ``#recorded`` name are longer, and ``memlife export --erasures`` must still write them
    (and ``import --erasures`` read them)."""
    from memlife.erasure_export import dump_erasures, parse_erasures

    long_id = "L" * 256
    store = SqliteStore(tmp_path / "memlife.db")
    try:
        for text in TEXTS[:2]:
            tombstones.add(store, [_rec(long_id, text, sha=content_sha256(text + "!"))])
        lines = list(dump_erasures(store))
    finally:
        store.close()
    tombs, _ = parse_erasures(lines)
    assert len(tombs) == 4 and max(len(t.record_id) for t in tombs) == 256 + 26


def test_a_held_copy_the_file_defers_is_no_stray_live_text(home: Path) -> None:
    """Attacks ``not (r.held and ... in deferred)`` in ``memlife/erasure_export.py::
    _refuse_live_text``: the held copy 'h' of the erased 'x' was deferred; the migrated
    store holds 'h' (still held) and takes the erasures file: tombstone and deferral."""
    from memlife.erasure_export import dump_erasures, load_erasures

    held = rec("h", TEXTS[0], ns="notes", retention=RetentionClass.legal_hold)
    old = SqliteStore(home / "old.db")
    try:
        old.put_many([rec("x", TEXTS[0]), held])
        assert erase(old, "u-1", ids=["x"], now=NOW)["deferred"] == ["h"]
        lines = list(dump_erasures(old))
    finally:
        old.close()
    new = SqliteStore(home / "new.db")
    try:
        new.put_many([held])
        out = load_erasures(new, lines)
        assert out["tombstones_added"] == 1 and out["carried"] == ["h"]
        assert [p["record_id"] for p in pending_erasures(new)] == ["h"]
    finally:
        new.close()


@pytest.mark.parametrize("copy", [TEXTS[0], "lives in LISBON"])
def test_a_held_copy_of_the_first_text_goes_when_the_id_was_erased_twice(
    home: Path, copy: str
) -> None:
    """Attacks ``out.setdefault(rid, set()).update(...)`` in ``memlife/erase.py::
    _erased_keys`` (both tombstones of a reused id count, the second name read as the id)
    and the folded key in ``tombstone_keys``: the held copy 'h' of x's first text was
    deferred; x was reused and erased again. Releasing h's hold must still erase h."""
    store = SqliteStore(home / "memlife.db")
    try:
        held = rec("h", copy, ns="notes", retention=RetentionClass.legal_hold)
        store.put_many([rec("x", TEXTS[0]), held])
        assert erase(store, "u-1", ids=["x"], now=NOW)["deferred"] == ["h"]
        assert store.put_many([rec("x", TEXTS[1])]).succeeded == ["x"]
        assert erase(store, "u-1", ids=["x"], now=LATER)["erased"] == ["x"]
        out = release_hold(store, ["h"], now=NOW)
        assert [e["erased"] for e in out["erasures"]] == [["h"]] and store.get("h") is None
    finally:
        store.close()


def _on_select(monkeypatch: pytest.MonkeyPatch, call: int, then: Any) -> None:
    """Run ``then()`` right after the erasure's ``call``-th selection returns (a writer
    on another connection landing there)."""
    import memlife.erase as erasure

    real, calls = erasure._select, []

    def select(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        calls.append(1)
        if len(calls) == call:
            then()
        return out

    monkeypatch.setattr(erasure, "_select", select)


def test_a_replacement_written_after_the_last_selection_is_refused(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks the first ``tombstones.add`` in ``memlife/erase.py::_erase`` (committed
    before the final selection): a night writes a model replacement of x and y right after
    the erasure's last selection. It must meet x's tombstone (ERASED_SOURCE), else it
    carries the erased claim, active, unseen by the erasure."""
    db = home / "memlife.db"
    store = SqliteStore(db)
    got: list[Any] = []

    def night() -> None:
        with SqliteStore(db) as other:
            repl = rec("r-1", "Lives in Lisbon and drinks tea.", supersedes=("x", "y"))
            got.append(tombstones.write_replacement(other, repl))

    try:
        store.put_many([rec("x", TEXTS[0]), rec("y", "Drinks green tea.")])
        _on_select(monkeypatch, 2, night)
        assert erase(store, "u-1", ids=["x"], now=NOW)["erased"] == ["x"]
        assert [f.code for f in got[0].failed] == ["ERASED_SOURCE"]
        assert store.get("r-1") is None
    finally:
        store.close()


def test_a_copy_found_by_the_second_selection_is_tombstoned_by_its_id(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks the second ``tombstones.add(store, free)`` in ``memlife/erase.py::_erase``:
    a copy 'c' of x's text lands between the two selections (a writer that checks no
    tombstone); the second selection erases it, and its id must be tombstoned too (a
    racing replacement naming 'c' as a source, the access ledger's rows of 'c')."""
    db = home / "memlife.db"
    store = SqliteStore(db)

    def writer() -> None:
        with SqliteStore(db) as other:
            other.put_many([rec("c", TEXTS[0], ns="notes")])

    try:
        store.put_many([rec("x", TEXTS[0])])
        _on_select(monkeypatch, 1, writer)
        assert sorted(erase(store, "u-1", ids=["x"], now=NOW)["erased"]) == ["c", "x"]
        assert {t["record_id"] for t in tombstones.listing(store, "u-1")} == {"c", "x"}
    finally:
        store.close()


def test_a_record_that_reused_an_erased_id_may_be_consolidated(tmp_path: Path) -> None:
    """Attacks the source check ``record_id IN (sources)`` in ``memlife/stores/sqlite.py::
    _tombstone_refusal``: u-1's 'x' was erased; u-1 writes a new 'x' (allowed) and a
    duplicate 'y'. The night's replacement of x and y names the live 'x', not the erased
    one, yet is refused ERASED_SOURCE (not retried): the new 'x' is never consolidated."""
    store = SqliteStore(tmp_path / "memlife.db")
    try:
        store.put_many([rec("x", TEXTS[0])])
        assert erase(store, "u-1", ids=["x"], now=NOW)["erased"] == ["x"]
        store.put_many([rec("x", TEXTS[1]), rec("y", "Owns a bicycle that is red.")])
        out = store.put_replacement(rec("r-1", TEXTS[1], supersedes=("x", "y")))
        assert out.succeeded == ["r-1"], out.failed
    finally:
        store.close()


def test_a_release_to_legal_hold_is_refused_and_erases_nothing(home: Path) -> None:
    """Attacks ``if retention_class is RetentionClass.legal_hold: raise`` in ``memlife/
    erase.py::release_hold``: 'releasing' h into legal_hold would apply h's pending
    erasure (the release erases what it deferred) while h is to stay held."""
    from memlife.errors import EraseError

    store = SqliteStore(home / "memlife.db")
    try:
        held = rec("h", TEXTS[0], ns="notes", retention=RetentionClass.legal_hold)
        store.put_many([rec("x", TEXTS[0]), held])
        assert erase(store, "u-1", ids=["x"], now=NOW)["deferred"] == ["h"]
        with pytest.raises(EraseError):
            release_hold(store, ["h"], retention_class=RetentionClass.legal_hold, now=NOW)
        assert store.get("h") == held and len(pending_erasures(store)) == 1
    finally:
        store.close()


class _RemoteWithRecords(_RemoteStore):
    """A store without a SQLite file whose records are read by id (AgentCore-like)."""

    def __init__(self, *records: Any) -> None:
        self.records = {r.id: r for r in records}

    def get(self, rid: str) -> Any:
        return self.records.get(rid)


@pytest.mark.usefixtures("aws")
def test_a_reused_id_is_a_source_on_a_store_without_its_own_file() -> None:
    """Attacks the re-check in ``memlife/tombstones.py::refusal`` (stores whose tombstones
    live in the DynamoDB state): u-1's 'x' was erased; a new 'x' of u-1 with other text is
    a source a replacement may name. The erased text under the id (the record between its
    tombstone and its delete) or another actor's 'x' still is no source."""
    erased = _rec("x", "Lives in Lisbon.")
    tombstones.add(_RemoteStore(), [erased])
    replacement = _rec("r-1", "Owns a red bicycle.").model_copy(
        update={"provenance": erased.provenance.model_copy(update={"supersedes": ["x", "y"]})}
    )
    # the id taken again after its erasure (audit 49vi: one dated before it is the erased
    # record itself under an older text)
    again = _rec("x", "Owns a red bicycle.").model_copy(update={"created_at": utcnow()})
    reused = _RemoteWithRecords(again, _rec("y", "Rides daily."))
    assert tombstones.refusal(reused, replacement) is None
    window = _RemoteWithRecords(erased, _rec("y", "Rides daily."))
    assert tombstones.refusal(window, replacement) == "ERASED_SOURCE"
    other = _RemoteWithRecords(_rec("x", "Owns a red bicycle.", actor="u-2"))
    assert tombstones.refusal(other, replacement) == "ERASED_SOURCE"
    assert tombstones.refusal(_RemoteWithRecords(), replacement) == "ERASED_SOURCE"
