"""Guards left untested by the twenty-third audit (session 37): moving a store (the access
ledger rows and the erasures carried by export/import) and reading the receipts dataset
(a record's history across runs, runs of a date range, which file belongs to a run).
Three tests fail on the code before session 37 (an erasures file's pending line of another
actor, a pending erasure of a record not held here, hostile erasures lines)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from memlife.access_export import export_access, import_access
from memlife.ledger import SCHEMA, AccessLedger, query_sha256
from memlife.model import content_sha256
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke
from tests.support.records import good

BORN = datetime(2026, 1, 2, 10, 0, tzinfo=UTC)  # good()'s created_at
NS = "/users/u-1/preferences"  # good()'s namespace
QS = query_sha256("what do I drink?")


def _store(tmp_path: Path, *records: dict[str, Any], name: str = "s.db") -> str:
    """A SQLite store holding ``records`` (imported through the CLI); its URL."""
    url = f"sqlite:///{tmp_path / name}"
    src = tmp_path / f"{name}.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in records))
    code, out, err = invoke("import", str(src), "--store", url)
    assert code == 0, out + err
    return url


def _reads(**cols: list[Any]) -> pa.Table:
    n = len(next(iter(cols.values())))
    base = {
        "actor_id": ["u-1"] * n,
        "namespace": [NS] * n,
        "record_id": ["m-1"] * n,
        "accessed_at": [BORN + timedelta(hours=1)] * n,
        "rank": [1] * n,
        "query_sha256": [QS] * n,
    }
    return pa.table({**base, **cols}, schema=pa.schema([f.with_nullable(True) for f in SCHEMA]))


# -- access_export ------------------------------------------------------------------------


def test_a_read_at_the_records_creation_instant_is_exported(tmp_path: Path) -> None:
    """Attacks ``accessed_at >= created_at`` in `memlife/access_export.py::_own_reads`
    (``>``) and the microseconds of ``created_at`` in ``births``: a read stamped at the very
    instant the record was created (a recall of a record just written) is the record's own
    and moves with it; one a fraction of a second before is an earlier record's."""
    half = "2026-01-02T11:00:00.500000Z"
    _store(tmp_path, good("m-1"), good("m-2", created_at=half, last_verified_at=half))
    ledger = AccessLedger(tmp_path / "ledger")
    ledger.append("u-1", NS, "m-1", rank=1, query_sha256=QS, at=BORN)
    ledger.append("u-1", NS, "m-1", rank=1, query_sha256=QS, at=BORN - timedelta(microseconds=1))
    ledger.append("u-1", NS, "m-2", at=BORN + timedelta(hours=1, milliseconds=200))
    ledger.flush()
    with SqliteStore(tmp_path / "s.db") as store:
        assert export_access(store, ledger, tmp_path / "reads.parquet") == 1
    got = pq.read_table(tmp_path / "reads.parquet")["accessed_at"].to_pylist()
    assert got == [BORN]


def test_a_read_within_a_day_of_clock_skew_is_added_and_one_past_it_is_refused(
    tmp_path: Path,
) -> None:
    """Attacks ``FUTURE_SKEW = timedelta(days=1)`` in `memlife/access_export.py` (0 days, or
    a month): a read stamped hours ahead (the exporting machine's clock runs fast) is a
    read; one two days ahead is refused by row, never scored as a recent recall."""
    _store(tmp_path, good("m-1"))
    now = BORN + timedelta(days=10)
    late = [now + timedelta(hours=12), now + timedelta(days=1), now + timedelta(days=2)]
    with SqliteStore(tmp_path / "s.db") as store, AccessLedger(tmp_path / "ledger") as ledger:
        got = import_access(store, ledger, _reads(accessed_at=late), now=now)
    assert got.rows == 2
    assert [r.split(":")[0] for r in got.refused] == ["row 3"] and "later" in got.refused[0]


def test_an_access_file_missing_a_column_is_an_input_error_naming_it(tmp_path: Path) -> None:
    """Attacks ``if f.name not in table.column_names`` in
    `memlife/access_export.py::read_access_file`: a file without ``namespace`` is refused
    as input, naming the column (not a KeyError from deep in Arrow)."""
    from memlife.access_export import read_access_file
    from memlife.errors import InputError

    pq.write_table(_reads(rank=[1]).drop_columns(["namespace"]), tmp_path / "r.parquet")
    with pytest.raises(InputError, match="column 'namespace' is missing"):
        read_access_file(tmp_path / "r.parquet")


def test_query_text_around_a_digest_is_refused(tmp_path: Path) -> None:
    """Attacks the anchors of ``^[0-9a-f]{64}$`` in `memlife/access_export.py::import_access`:
    a hostile file wraps query text around a digest; the ledger never holds query text."""
    _store(tmp_path, good("m-1"))
    text = [QS, f"my bank password is hunter2 {QS}", f"{QS}\nwhat is my pin?"]
    with SqliteStore(tmp_path / "s.db") as store, AccessLedger(tmp_path / "ledger") as ledger:
        got = import_access(store, ledger, _reads(query_sha256=text, accessed_at=[
            BORN + timedelta(hours=h) for h in (1, 2, 3)]))  # fmt: skip
        kept = ledger.read()["query_sha256"].to_pylist()
    assert got.rows == 1 and [r.split(":")[0] for r in got.refused] == ["row 2", "row 3"]
    assert kept == [QS]


def test_a_row_wrong_three_ways_is_refused_once(tmp_path: Path) -> None:
    """Attacks ``pc.invert(bad)`` in `memlife/access_export.py::import_access` (one reason a
    row): a row missing its namespace, stamped next year, holding query text is one refused
    row, named once by its first reason."""
    _store(tmp_path, good("m-1"))
    table = _reads(namespace=[None], accessed_at=[BORN + timedelta(days=400)],
                   query_sha256=["what do I drink?"])  # fmt: skip
    with SqliteStore(tmp_path / "s.db") as store, AccessLedger(tmp_path / "ledger") as ledger:
        got = import_access(store, ledger, table, now=BORN)
    assert len(got.refused) == 1 and got.refused[0].startswith("row 1:")
    assert "required" in got.refused[0] and got.rows == 0


# -- erasure_export -----------------------------------------------------------------------


def _tomb(actor: str, rid: str, text: str) -> str:
    return json.dumps({"kind": "tombstone", "actor_id": actor, "record_id": rid,
                       "content_sha256": content_sha256(text)})  # fmt: skip


def _pending(rid: str, actor: str = "u-1", ns: str = NS) -> str:
    return json.dumps({"kind": "pending_erasure", "record_id": rid, "actor_id": actor,
                       "namespace": ns, "reason": "ERASURE_REQUEST",
                       "requested_at": "2026-01-03T00:00:00Z"})  # fmt: skip


def test_a_tombstone_line_carrying_content_is_refused_by_line_and_field(
    home: Path, tmp_path: Path
) -> None:
    """Attacks ``extra="forbid"`` of `memlife/erasure_export.py::Tombstone` and
    ``PendingErasure``: a tampered file adds the erased text beside its hash; the file
    never holds content, so the line is refused by number and field before any record."""
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(good("m-1")) + "\n")
    store = f"sqlite:///{tmp_path / 'new.db'}"
    leak = {"content": "Was treated for depression."}
    tomb = json.dumps(json.loads(_tomb("u-1", "m-0", leak["content"])) | leak)
    pend = json.dumps(json.loads(_pending("m-1")) | leak)
    for lines, n in (([tomb], 1), ([_tomb("u-1", "m-9", "x"), pend], 2)):
        bad = tmp_path / "e.jsonl"
        bad.write_text("\n".join(lines) + "\n")
        code, out, err = invoke("import", str(src), "--store", store, "--erasures", str(bad))
        assert code == 2 and f"erasures line {n}: field 'content'" in out + err, out + err
        assert not (tmp_path / "new.db").exists()


@pytest.mark.parametrize(
    ("line", "named"),
    [
        (json.dumps(json.loads(_tomb("u-1", "m-2", "x")) | {"norm_sha256": "Likes jazz."}),
         "field 'norm_sha256'"),
        (_pending("m-1").replace("ERASURE_REQUEST", "erase it; and m-2"), "field 'reason'"),
        ('["tombstone", "u-1", "m-2"]', "field 'kind'"),
        ('"tombstone"', "field 'kind'"),
        (_tomb("", "m-2", "x"), "field 'actor_id'"),
    ],
    ids=["norm-not-a-hash", "reason-free-text", "a-list", "a-string", "no-actor"],
)  # fmt: skip
def test_a_bad_erasures_line_is_refused_by_number_and_field(line: str, named: str) -> None:
    """Attacks the ``norm_sha256`` and ``reason`` patterns of
    `memlife/erasure_export.py` and ``isinstance(data, dict)`` in ``parse_erasures``: a
    tampered line is named by number and field (InputError), never an AttributeError."""
    from memlife.erasure_export import parse_erasures
    from memlife.errors import InputError

    with pytest.raises(InputError, match=f"erasures line 2: {named}"):
        parse_erasures([_tomb("u-1", "m-0", "x"), line])


def test_blank_lines_of_an_erasures_file_are_skipped() -> None:
    """Attacks ``if not line.strip(): continue`` in
    `memlife/erasure_export.py::parse_erasures`: an edited file's blank lines (and the
    trailing newline) are no lines to refuse."""
    from memlife.erasure_export import parse_erasures

    tombs, pending = parse_erasures(["\n", _tomb("u-1", "m-0", "x") + "\n", "  \t\n",
                                     _pending("m-1") + "\n", "\n"])  # fmt: skip
    assert [t.record_id for t in tombs] == ["m-0"] and [p.record_id for p in pending] == ["m-1"]


def test_erased_text_in_another_case_stays_refused_after_the_move(
    home: Path, tmp_path: Path
) -> None:
    """Attacks ``norm_sha256=t.get("norm_sha256")`` in
    `memlife/erasure_export.py::dump_erasures`: the old store refused the erased text once
    case and punctuation are folded; so must the store it moved to."""
    old = _store(tmp_path, good("m-1", content="Was treated for depression in 2025."),
                 good("m-3", content="Likes tea."), name="old.db")  # fmt: skip
    code, out, err = invoke("erase", "--actor", "u-1", "--id", "m-1", "--yes", "--store", old)
    assert code == 0, out + err
    out_file, erasures = tmp_path / "r.jsonl", tmp_path / "e.jsonl"
    code, out, err = invoke("export", "--store", old, "-o", str(out_file),
                            "--erasures", str(erasures))  # fmt: skip
    assert code == 0, out + err
    new = f"sqlite:///{tmp_path / 'new.db'}"
    code, out, err = invoke("import", str(out_file), "--store", new, "--erasures", str(erasures))
    assert code == 0, out + err
    again = tmp_path / "again.jsonl"
    again.write_text(json.dumps(good("m-9", content="WAS TREATED FOR DEPRESSION, IN 2025")) + "\n")
    code, out, err = invoke("import", str(again), "--store", new, "--json")
    assert code == 1 and json.loads(out)["conflicts"][0]["code"] == "ERASED_CONTENT", out + err


def test_a_held_copy_of_erased_text_the_file_defers_is_carried(home: Path, tmp_path: Path) -> None:
    """Attacks ``r.id not in deferred`` in `memlife/erasure_export.py::_refuse_live_text`:
    a held record holding the erased text, which the file defers, is this store's pending
    erasure (not a sign of a foreign file): carried, and erased when its hold goes."""
    held = good("h-1", content="Likes jazz.", retention_class="legal_hold")
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(held) + "\n" + json.dumps(good("m-3", content="Likes tea.")) + "\n")
    carried = tmp_path / "e.jsonl"
    carried.write_text(_tomb("u-1", "m-1", "Likes jazz.") + "\n" + _pending("h-1") + "\n")
    store = f"sqlite:///{tmp_path / 'new.db'}"
    code, out, err = invoke("import", str(src), "--store", store, "--erasures", str(carried),
                            "--json")  # fmt: skip
    assert code == 0 and json.loads(out)["erasures"]["carried"] == ["h-1"], out + err
    code, out, err = invoke("hold", "release", "--id", "h-1", "--store", store)
    assert code == 0, out + err
    with SqliteStore(tmp_path / "new.db") as s:
        assert s.get("h-1") is None and s.get("m-3") is not None


def test_a_derived_pending_erasure_keeps_why_it_was_in_its_erasure(
    home: Path, tmp_path: Path
) -> None:
    """Attacks ``reason=deferred_as(journal, p)`` in
    `memlife/erasure_export.py::dump_erasures`: a held replacement deferred because its
    source was erased is carried as such (withdrawn when its hold goes), not as a record
    someone asked to erase."""

    m1, m2 = good("m-1", content="Likes jazz.", status="superseded"), good(
        "m-2", content="Likes tea.", status="superseded")  # fmt: skip
    r1 = good("r-1", content="Likes jazz and tea.", retention_class="legal_hold")
    for r, prov in ((m1, {"replaced_by": "r-1"}), (m2, {"replaced_by": "r-1"}),
                    (r1, {"supersedes": ["m-1", "m-2"]})):  # fmt: skip
        r["provenance"] = {**r.get("provenance", {}), **prov}
    old = _store(tmp_path, m1, m2, r1, name="old.db")
    code, out, err = invoke("erase", "--actor", "u-1", "--id", "m-1", "--yes", "--store", old)
    assert code == 0, out + err
    erasures = tmp_path / "e.jsonl"
    code, out, err = invoke("export", "--store", old, "-o", str(tmp_path / "r.jsonl"),
                            "--erasures", str(erasures))  # fmt: skip
    assert code == 0, out + err
    lines = [json.loads(x) for x in erasures.read_text().splitlines()]
    assert [(x["record_id"], x["reason"]) for x in lines if x["kind"] == "pending_erasure"] == [
        ("r-1", "WITHDRAWN_REPLACEMENT")]  # fmt: skip


def test_a_tombstone_matching_a_live_record_once_folded_is_refused(
    home: Path, tmp_path: Path
) -> None:
    """Attacks ``tombstone_keys(t.content_sha256, t.norm_sha256)`` in
    `memlife/erasure_export.py::_refuse_live_text`: a live record holding the tombstone's
    text in another case is that text (the store would refuse it); the file is not this
    store's erasures."""
    from memlife.stores.sqlite import tombstone_norm

    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(good("m-1", content="LIKES JAZZ!")) + "\n")
    tomb = json.loads(_tomb("u-1", "m-0", "Likes jazz.")) | {
        "norm_sha256": tombstone_norm("Likes jazz.")}  # fmt: skip
    bad = tmp_path / "e.jsonl"
    bad.write_text(json.dumps(tomb) + "\n")
    store = f"sqlite:///{tmp_path / 'new.db'}"
    code, out, err = invoke("import", str(src), "--store", store, "--erasures", str(bad))
    assert code == 2 and "not this store's erasures" in out + err, out + err
    with SqliteStore(tmp_path / "new.db") as s:
        assert s.tombstones() == []


def test_another_actors_pending_erasure_does_not_defer_a_record_of_the_same_id(
    home: Path, tmp_path: Path
) -> None:
    """Attacks ``(r.actor_id, r.namespace) != (p.actor_id, p.namespace)`` in
    `memlife/erase.py::carry_pending`: a pending erasure of u-2's h-1 is not u-1's h-1 (ids
    are unique per actor and store only); u-1's record is not deferred, and releasing its
    hold erases nothing."""
    src = tmp_path / "r.jsonl"
    src.write_text(
        json.dumps(good("h-1", content="Owns a boat.", retention_class="legal_hold")) + "\n"
    )
    carried = tmp_path / "e.jsonl"
    carried.write_text(_pending("h-1", actor="u-2", ns="/users/u-2/x") + "\n")
    store = f"sqlite:///{tmp_path / 'new.db'}"
    code, out, err = invoke(
        "import", str(src), "--store", store, "--erasures", str(carried), "--json"
    )
    assert code == 0, out + err
    got = json.loads(out)["erasures"]
    assert got["carried"] == [] and got["not_found"] == ["h-1"]
    code, out, err = invoke("hold", "release", "--id", "h-1", "--store", store)
    assert code == 0, out + err
    with SqliteStore(tmp_path / "new.db") as s:
        assert s.get("h-1") is not None


def test_a_pending_line_of_another_actor_does_not_exempt_a_live_record(
    home: Path, tmp_path: Path
) -> None:
    """Attacks the ``deferred`` exemption in `memlife/erasure_export.py::_refuse_live_text`:
    the tombstone of u-1's live text is refused unless the file defers that very record;
    a pending line naming the same id under u-2 defers nothing here (carry_pending lists
    it not found), so it must not lift the refusal."""
    live = good("m-1", content="Likes jazz.")
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(live) + "\n")
    bad = tmp_path / "e.jsonl"
    bad.write_text(_tomb("u-1", "m-0", "Likes jazz.") + "\n"
                   + _pending("m-1", actor="u-2", ns="/users/u-2/x") + "\n")  # fmt: skip
    store = f"sqlite:///{tmp_path / 'new.db'}"
    code, out, err = invoke("import", str(src), "--store", store, "--erasures", str(bad))
    assert code == 2 and "not this store's erasures" in out + err, out + err
    with SqliteStore(tmp_path / "new.db") as s:
        assert s.tombstones() == []


def test_a_pending_erasure_of_a_record_not_held_here_is_not_deferred(
    home: Path, tmp_path: Path
) -> None:
    """Attacks `memlife/erase.py::carry_pending` (reached from `memlife import --erasures`):
    a pending erasure waits for its record's hold; a file naming a record that is not held
    here does not belong to these records. Deferred anyway, the record was erased by the
    release of another record's hold."""
    free = good("m-1", content="Likes jazz.")
    held = good("h-1", content="Owns a boat.", retention_class="legal_hold")
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(free) + "\n" + json.dumps(held) + "\n")
    carried = tmp_path / "e.jsonl"
    carried.write_text(_pending("m-1") + "\n")
    store = f"sqlite:///{tmp_path / 'new.db'}"
    invoke("import", str(src), "--store", store, "--erasures", str(carried))
    code, out, err = invoke("hold", "release", "--id", "h-1", "--store", store)
    assert code == 0, out + err
    with SqliteStore(tmp_path / "new.db") as s:
        assert s.get("m-1") is not None


@pytest.mark.parametrize(
    "line",
    [b"[" * 100_000, b'{"kind": "tombstone", "actor_id": ' + b"9" * 5000 + b"}", b"\xff\xfe{}"],
    ids=["deep", "long-number", "not-utf8"],
)
def test_a_hostile_erasures_line_is_refused_by_number(
    home: Path, tmp_path: Path, line: bytes
) -> None:
    """Attacks the error handling of `memlife/erasure_export.py::parse_erasures`: a bad line
    is refused by number (exit 2) before any record is imported."""
    bad = tmp_path / "e.jsonl"
    bad.write_bytes(_tomb("u-1", "m-0", "Likes jazz.").encode() + b"\n" + line + b"\n")
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(good("m-1")) + "\n")
    store = f"sqlite:///{tmp_path / 'new.db'}"
    code, out, err = invoke("import", str(src), "--store", store, "--erasures", str(bad))
    assert code == 2 and "erasures line 2" in out + err, out + err
    assert not (tmp_path / "new.db").exists()


# -- receipts_history / evidence_dataset (synthetic evidence under a file sink) -------------


def _op(rid: str, op: str, cutoff: datetime, **over: object) -> dict[str, Any]:
    return {"operation_id": op, "actor_id": "u-1", "namespace": NS, "record_id": rid,
            "action": "delete", "reason_codes": ["HARD_EXPIRED"], "outcome": "deleted",
            "state": "RECEIPTED", "attempts": 1, "replacement_id": None,
            "content_sha256": "a" * 64, "updated_at": cutoff, "mode": "apply",
            "cutoff": cutoff, "policy_version": "v1", "service_identity": "test",
            "store": None, **over}  # fmt: skip


def _run(root: Path, cutoff: datetime, run_id: str, parts: list[list[dict[str, Any]]], *,
         seal: int | None = -1, store: str | None = None) -> list[str]:  # fmt: skip
    """A run folder with its receipt and manifest, and its dataset files (one per seal);
    the receipt seals ``parts[seal]`` (None: a receipt from before receipts named it)."""
    import hashlib

    from memlife.receipts_dataset import SCHEMA as DS
    from memlife.receipts_dataset import dataset_key

    keys = []
    for n, rows in enumerate(parts):
        key = dataset_key(run_id, cutoff, n)
        (root / key).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows, schema=DS), root / key)
        keys.append(key)
    evidence = {}
    if seal is not None and keys:
        body = (root / keys[seal]).read_bytes()
        evidence = {"dataset_key": keys[seal], "dataset_sha256": hashlib.sha256(body).hexdigest()}
    folder = root / f"runs/{cutoff:%Y/%m/%d}/{run_id}"
    folder.mkdir(parents=True)
    doc = {"run_id": run_id, "status": "success", "cutoff": cutoff.isoformat(),
           "started_at": cutoff.isoformat(), "evidence": evidence}  # fmt: skip
    (folder / "receipt.json").write_text(json.dumps(doc))
    manifest = {"run_id": run_id, "cutoff": cutoff.isoformat(), "started_at": cutoff.isoformat(),
                "store_identity": store}  # fmt: skip
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return keys


def _day(d: int) -> datetime:
    return datetime(2026, 1, d, 2, 0, tzinfo=UTC)


def _rid(d: int, tag: str = "a") -> str:
    return f"202601{d:02d}T020000Z-{tag}"


def test_a_run_sealed_before_receipts_named_its_file_is_read_from_its_latest_seal(
    tmp_path: Path,
) -> None:
    """Attacks ``max(latest.get(run, key), key)`` in
    `memlife/receipts_history.py::partition_keys` (``min``): a run sealed before receipts
    named their dataset file (session 26) is read from its greatest name, its latest
    seal's; part-0 is a crashed attempt's, which still said the record was only planned."""
    from memlife.audit import FileSink
    from memlife.receipts_history import record_history

    first = [_op("m-1", "op-1", _day(5), outcome=None, state="PLANNED")]
    _run(tmp_path, _day(5), _rid(5), [first, [_op("m-1", "op-1", _day(5))]], seal=None)
    gaps: list[dict[str, str]] = []
    rows = record_history(FileSink(tmp_path), "m-1", problems=gaps)
    assert gaps == [] and [(r["state"], r["outcome"]) for r in rows] == [("RECEIPTED", "deleted")]


def _sup(rid: str, op: str, d: int, to: str, actor: str = "u-1") -> dict[str, Any]:
    return _op(rid, op, _day(d), action="supersede", outcome="superseded", replacement_id=to,
               actor_id=actor, reason_codes=["DUPLICATE"])  # fmt: skip


def test_a_hand_over_is_followed_in_its_own_store_and_actor_only(tmp_path: Path) -> None:
    """Attacks ``(r["actor_id"], r["store"]) == (last["actor_id"], last["store"])`` in
    `memlife/receipts_history.py::handed_on`: stores sharing one receipts location, and
    actors within one store, reuse replacement ids; m-1's hand-over goes on through its own
    store's and actor's supersede of r-1 only, and stops at a later operation on m-1."""
    from memlife.audit import FileSink
    from memlife.receipts_history import handed_on, record_history

    a, b = "sqlite:///a.db", "sqlite:///b.db"
    _run(tmp_path, _day(3), _rid(3), [[_sup("r-1", "op-0", 3, "r-0")]], store=a)  # an older r-1
    _run(tmp_path, _day(5), _rid(5), [[_sup("m-1", "op-1", 5, "r-1")]], store=a)
    _run(tmp_path, _day(6), _rid(6, "b"), [[_sup("r-1", "op-2", 6, "r-2")]], store=b)
    _run(tmp_path, _day(6), _rid(6, "c"), [[_sup("r-1", "op-3", 6, "r-9", actor="u-2")]], store=a)
    # r-3 handed back to r-1 in the same run (a loop in the evidence): followed once
    _run(tmp_path, _day(7), _rid(7), [[_sup("r-1", "op-4", 7, "r-3"), _sup("r-3", "op-7", 7, "r-1")]],
         store=a)  # fmt: skip
    _run(tmp_path, _day(8), _rid(8), [[_op("m-1", "op-5", _day(8), action="restore",
                                           outcome="restored")]], store=a)  # fmt: skip
    _run(tmp_path, _day(9), _rid(9), [[_sup("r-3", "op-6", 9, "r-4")]], store=a)
    sink = FileSink(tmp_path)
    rows = record_history(sink, "m-1")
    assert [r["operation_id"] for r in rows] == ["op-1", "op-5"]
    got = handed_on(sink, rows)
    assert [(r["run_id"], r["via"], r["replacement_id"]) for r in got] == [
        (_rid(7), "r-1", "r-3"), (_rid(7), "r-3", "r-1")]  # fmt: skip


def test_a_receipt_naming_a_file_that_is_no_partition_file_is_not_read(tmp_path: Path) -> None:
    """Attacks ``is_part_key(key)`` in `memlife/receipts_history.py::_sealed`: a receipt whose
    ``dataset_key`` names some other file under the run's folder (a forged seal) is not
    followed; the run's own partition file is read."""
    import hashlib

    from memlife.audit import FileSink
    from memlife.receipts_dataset import SCHEMA as DS
    from memlife.receipts_history import record_history

    (key,) = _run(tmp_path, _day(5), _rid(5), [[_op("m-1", "op-1", _day(5))]])
    forged = key.replace("part-0.parquet", "part-0.parquet.bak")
    pq.write_table(pa.Table.from_pylist([_op("m-live", "op-9", _day(5))], schema=DS),
                   tmp_path / forged)  # fmt: skip
    receipt = tmp_path / f"runs/2026/01/05/{_rid(5)}/receipt.json"
    doc = json.loads(receipt.read_text())
    doc["evidence"] = {
        "dataset_key": forged,
        "dataset_sha256": hashlib.sha256((tmp_path / forged).read_bytes()).hexdigest(),
    }
    receipt.write_text(json.dumps(doc))  # fmt: skip
    sink = FileSink(tmp_path)
    assert record_history(sink, "m-live") == []
    assert [r["operation_id"] for r in record_history(sink, "m-1")] == ["op-1"]


def test_a_date_range_holds_its_last_day(tmp_path: Path) -> None:
    """Attacks ``range((until - since).days + 1)`` in
    `memlife/receipts_history.py::_day_prefixes` and ``day > until`` in ``runs_between``:
    the runs and the history of 5 to 7 January hold the run of the 7th, not the 8th's, for
    a bounded range and an open one."""
    from memlife.audit import FileSink
    from memlife.receipts_history import record_history, runs_between

    for d in (5, 7, 8):
        _run(tmp_path, _day(d), _rid(d), [[_op("m-1", f"op-{d}", _day(d), action="quarantine")]])
    sink = FileSink(tmp_path)
    first, last = _day(5).date(), _day(7).date()
    for since in (first, None):
        assert [r.run_id for r in runs_between(sink, since, last)] == [_rid(5), _rid(7)]
        got = record_history(sink, "m-1", since=since, until=last)
        assert [r["operation_id"] for r in got] == ["op-5", "op-7"]


def test_a_runs_dataset_day_is_its_cutoffs_utc_day() -> None:
    """Attacks ``cutoff.astimezone(UTC)`` in `memlife/receipts_dataset.py::dataset_key`: a
    cutoff given in local time lies under its UTC day, the day of its run folder."""
    from datetime import timezone

    from memlife.receipts_dataset import dataset_key, is_part_key

    local = datetime(2026, 1, 6, 2, 0, tzinfo=timezone(timedelta(hours=5)))  # 5th, 21:00 UTC
    key = dataset_key("r-1", local, 1)
    assert key == "dataset/operations/date=2026-01-05/run_id=r-1/part-001.parquet"
    assert is_part_key(key)


def test_a_file_named_like_a_part_but_not_one_is_not_read(tmp_path: Path) -> None:
    """Attacks ``part-(0|\\d{3})\\.parquet$`` in `memlife/receipts_dataset.py::PART_KEY`: for
    a run sealed before receipts named their file, the greatest name is read; a file added
    beside under a name no seal writes (part-1, part-9999, part-0.parquet.bak) is not it."""
    from memlife.audit import FileSink
    from memlife.receipts_dataset import SCHEMA as DS
    from memlife.receipts_history import record_history

    (key,) = _run(tmp_path, _day(5), _rid(5), [[_op("m-1", "op-1", _day(5))]], seal=None)
    forged = pa.Table.from_pylist([_op("m-live", "op-9", _day(5))], schema=DS)
    for name in ("part-1.parquet", "part-9999.parquet", "part-0.parquet.bak"):
        pq.write_table(forged, tmp_path / key.replace("part-0.parquet", name))
    sink = FileSink(tmp_path)
    assert record_history(sink, "m-live") == []
    assert [r["operation_id"] for r in record_history(sink, "m-1")] == ["op-1"]


class _Problems:
    def __init__(self) -> None:
        self.found: list[tuple[str, str]] = []

    def problem(self, code: str, **kw: Any) -> None:
        self.found.append((code, str(kw.get("key", "")).rsplit("/", 1)[-1]))


def test_a_legacy_runs_files_are_checked_by_what_they_say(tmp_path: Path) -> None:
    """Attacks ``said == _said(result) if key == parts[-1]`` and ``content_sha256`` in
    ``_SAID`` of `memlife/evidence_dataset.py::verify_dataset`: for a run sealed before
    receipts named their file, the file a reader takes must say the run's result (an
    earlier seal's rows there are a mismatch), and another file one seal's rows, content
    hash included."""
    from types import SimpleNamespace

    from memlife.audit import FileSink
    from memlife.evidence_dataset import verify_dataset

    planned = [_op("m-1", "op-1", _day(5), outcome=None, state="PLANNED")]
    done = [_op("m-1", "op-1", _day(5))]
    seals: list[tuple[dict[str, Any], list[dict[str, Any]]]] = [({}, planned), ({}, done)]
    run = SimpleNamespace(prefix=f"runs/2026/01/05/{_rid(5)}", run_id=_rid(5))
    cases = {
        "earlier seal read last": ([done, planned], [("DATASET_MISMATCH", "part-001.parquet")]),
        "another content hash": (
            [[{**planned[0], "content_sha256": "b" * 64}], done],
            [("DATASET_MISMATCH", "part-0.parquet")],
        ),
        "as sealed": ([planned, done], []),
    }
    for name, (parts, want) in cases.items():
        root = tmp_path / name.replace(" ", "-")
        _run(root, _day(5), _rid(5), parts, seal=None)
        v = _Problems()
        verify_dataset(FileSink(root), run, seals, done, v)
        assert v.found == want, name
