"""Guards left untested by the thirty-fifth audit (session 38): where an operator's or a
stored value (an export file name, an actor id, a record id) becomes a file path or a name
that must stay one tenant's: the export's output files, the starter evaluation set's case
ids, the receipts sink's keys. Four real bugs the audit found, fixed in session 38 (their tests
failed on the code before): an export over the store's own file emptied it; one file for
records and erasures lost the erasures; two tenants' starter case ids collided; one
tenant's erasure case hid another's."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memlife.audit import FileSink
from memlife.evalset import dump_cases, load_cases
from memlife.evalset_starter import erasure_cases, starter_cases
from memlife.ledger import AccessLedger
from memlife.model import MemoryRecord, Status
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke
from tests.support.gate import NOW, rec


@pytest.fixture()
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(tmp_path / "memlife.db")
    yield s
    s.close()


def superseded(rid: str, actor: str, content: str) -> MemoryRecord:
    return rec(rid, "facts", content, actor=actor).model_copy(update={"status": Status.superseded})


def erasure_receipt(sink: FileSink, op: str, actor: str, rid: str) -> None:
    """An erasure's operation receipt as erase writes it (ids only)."""
    doc = {"action": "erase", "outcome": "erased", "record_id": rid,
           "scope": {"actor_id": actor, "namespace": f"/users/{actor}/facts"}}  # fmt: skip
    assert sink.put_new(f"operations/{op}.json", json.dumps(doc).encode())


# -- export: an output file that is the store's own file ------------------------------------------


def test_export_to_the_stores_own_file_leaves_the_store_whole(home: Path) -> None:
    """Attacks the missing check in `memlife/cli/data.py::export` that an output file is not
    the store it reads: ``output.open("w")`` truncates the SQLite file under the open
    connection. Export is a reading command; afterwards the store must still hold its
    records (a refusal naming --output is the expected answer)."""
    db = home / "store.db"
    s = SqliteStore(db)
    s.put_many([rec("m-1", "facts", "Drinks green tea."), rec("m-2", "facts", "Likes hiking.")])
    s.close()
    before = db.stat().st_size
    assert before > 0
    code, _, _ = invoke("export", "--store", f"sqlite:///{db}", "--output", str(db))
    s = SqliteStore(db)
    try:
        kept = s.get("m-1")
    finally:
        s.close()
    assert kept is not None and kept.content == "Drinks green tea.", (code, db.stat().st_size)


def test_export_refuses_one_file_for_records_and_erasures(home: Path) -> None:
    """Attacks the missing check in `memlife/cli/data.py::export` that --output, --erasures
    and --access name different files: both are opened for writing at once and each
    truncates what the other wrote. Nothing in one file can serve both imports."""
    db = home / "store.db"
    s = SqliteStore(db)
    s.put_many([rec("m-1", "facts", "Was treated for depression in 2025."),
                rec("m-2", "facts", "Likes hiking.")])  # fmt: skip
    s.close()
    code, out, err = invoke("erase", "--actor", "u-1", "--id", "m-1", "--yes",
                            "--store", f"sqlite:///{db}")  # fmt: skip
    assert code == 0, out + err
    both = home / "both.jsonl"
    code, _, _ = invoke(
        "export", "--store", f"sqlite:///{db}", "--output", str(both), "--erasures", str(both)
    )
    assert code != 0, both.read_text(encoding="utf-8")


# -- the starter evaluation set: case ids of two tenants ------------------------------------------


def test_eval_init_writes_a_set_that_loads_when_two_tenants_ids_join_alike(
    store: SqliteStore, tmp_path: Path
) -> None:
    """Attacks `memlife/evalset_starter.py::starter_cases` (``id=f"stale-{actor}-{r.id}"``
    and every sibling id): ids built by joining two free strings with a character both may
    hold collide between tenants; the written set must load again."""
    store.put_many([superseded("x", "u-1", "Drinks green tea."),
                    superseded("1-x", "u", "Drinks black coffee.")])  # fmt: skip
    cases = starter_cases(store, now=NOW)
    path = dump_cases(cases, tmp_path / "cases.yaml")
    loaded = load_cases(path)
    assert {(c.actor_id, c.forbidden[0].id) for c in loaded} == {("u-1", "x"), ("u", "1-x")}


def test_eval_init_gives_each_tenants_superseded_record_its_own_case(store: SqliteStore) -> None:
    """Attacks `memlife/evalset_starter.py::starter_cases`' ``counts[(case.actor_id,
    case.kind)]`` (the cap is per actor): two actors whose ids do not join alike get one
    stale case each under ``per_kind=1``, each naming its own actor's record."""
    store.put_many([superseded("x", "u-1", "Drinks green tea."),
                    superseded("x2", "u-2", "Drinks black coffee.")])  # fmt: skip
    got = {(c.actor_id, c.forbidden[0].id) for c in starter_cases(store, now=NOW, per_kind=1)}
    assert got == {("u-1", "x"), ("u-2", "x2")}  # per_kind counts per actor, not per set


def test_erasure_cases_keep_one_case_per_tenant_for_a_shared_record_id(tmp_path: Path) -> None:
    """Attacks `memlife/evalset_starter.py::erasure_cases` (``out.setdefault(rid, ...)``):
    record ids are per store, not per tenant (an id erased for one actor may be written and
    erased for another); each actor's erased record must keep its own `erased` case."""
    sink = FileSink(tmp_path / "receipts")
    erasure_receipt(sink, "op-a", "tenant-a", "r-1")
    erasure_receipt(sink, "op-b", "tenant-b", "r-1")
    got = {(c.actor_id, c.forbidden[0].id) for c in erasure_cases(sink)}
    assert got == {("tenant-a", "r-1"), ("tenant-b", "r-1")}


# -- the local receipts sink: create-only names, a writer's leftovers ----------------------------


def test_file_sink_never_replaces_a_name_already_at_the_key(tmp_path: Path) -> None:
    """Attacks ``os.link(tmp, path)`` in `memlife/audit.py::FileSink.put_new` (create-only
    even when ``path.exists()`` says no): a link at the key whose target is missing is a
    name that exists; an ``os.replace`` there would overwrite it, as it would overwrite a
    receipt another writer linked in between the check and the write."""
    sink = FileSink(tmp_path / "receipts")
    assert sink.put_new("operations/first.json", b"{}")
    held = tmp_path / "receipts" / "operations" / "op-1.json"
    held.symlink_to(tmp_path / "receipts" / "operations" / "gone.json")
    assert sink.put_new("operations/op-1.json", b'{"second": true}') is False
    assert held.is_symlink()
    assert not (tmp_path / "receipts" / "operations" / "gone.json").exists()


def test_a_crashed_writers_temporary_file_is_no_receipt(tmp_path: Path) -> None:
    """Attacks ``not p.name.startswith(".tmp-")`` in `memlife/audit.py::FileSink.list`: a
    writer killed before its link leaves ``.tmp-*`` (half a receipt) beside the receipts;
    listed, every reader of ``operations/`` (eval init's erasure cases) parses it."""
    sink = FileSink(tmp_path / "receipts")
    erasure_receipt(sink, "op-a", "tenant-a", "r-1")
    (tmp_path / "receipts" / "operations" / ".tmp-k2j3h4").write_bytes(b'{"action": "era')
    assert list(sink.list("operations/")) == ["operations/op-a.json"]
    got = {(c.actor_id, c.forbidden[0].id) for c in erasure_cases(sink)}
    assert got == {("tenant-a", "r-1")}


def test_a_manifest_in_a_folder_below_a_run_is_no_run_of_its_own(tmp_path: Path) -> None:
    """Attacks ``[^/]+`` in `memlife/review.py::_RUN_KEY` (a run folder is ONE name under
    its day): a manifest one folder deeper (a copy dropped inside a run's folder) read as a
    run would be listed as a run named ``<run>/<folder>``, and ``receipts show`` of that
    name would read it as evidence."""
    from memlife.review import find_run, list_runs

    sink = FileSink(tmp_path / "receipts")
    run = "20260601T000000Z-nightly-abc1234567"
    doc = json.dumps({"run_id": run, "started_at": "2026-06-01T00:00:01+00:00"}).encode()
    assert sink.put_new(f"runs/2026/06/01/{run}/manifest.json", doc)
    assert sink.put_new(f"runs/2026/06/01/{run}/copy/manifest.json", doc)
    assert [r.run_id for r in list_runs(sink)] == [run]
    assert find_run(sink, f"{run}/copy") is None


# -- the ledger: CloudTrail log files become part names -------------------------------------------


def _read_event(rid: str, when: str) -> dict[str, object]:
    return {
        "eventSource": "bedrock-agentcore.amazonaws.com",
        "eventName": "GetMemoryRecord",
        "eventTime": when,
        "requestParameters": {"memoryId": "mem-1", "memoryRecordId": rid},
        "responseElements": {
            "memoryRecord": {"memoryRecordId": rid, "namespaces": ["/users/u1/facts"]}
        },
    }


def _log_file(folder: Path, name: str, *events: dict[str, object]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(gzip.compress(json.dumps({"Records": list(events)}).encode()))


def test_twenty_log_files_of_one_day_keep_twenty_parts(tmp_path: Path) -> None:
    """Attacks the digest length in `memlife/ledger_ingest.py::part_name` (each log file's
    rows go to a part named after its bytes, and a named part REPLACES what has its name):
    two files whose names collide overwrite each other's reads. Twenty files of one day
    must leave every read in the ledger."""
    trail = tmp_path / "trail" / "2025" / "05" / "01"
    for i in range(20):
        _log_file(trail, f"123_CloudTrail_us-east-1_20250501T{i:02d}00Z_x{i}.json.gz",
                  _read_event(f"m-{i:02d}", f"2025-05-01T{i:02d}:10:00Z"))  # fmt: skip
    ledger = AccessLedger(tmp_path / "ledger")
    report = ledger.ingest_cloudtrail(tmp_path / "trail")
    assert report.files == 20
    got = sorted(ledger.read().column("record_id").to_pylist())
    assert got == [f"m-{i:02d}" for i in range(20)]


def test_a_dot_named_file_in_the_trail_is_no_log_file(tmp_path: Path) -> None:
    """Attacks ``not Path(name).name.startswith(".")`` in `memlife/cloudtrail.py::
    is_log_name`: a dot-name in the trail folder is a copy in progress or a tool's hidden
    file, not a log CloudTrail delivered; its reads must not enter the ledger."""
    trail = tmp_path / "trail" / "2025" / "05" / "01"
    _log_file(trail, "123_CloudTrail_us-east-1_20250501T0100Z_a.json.gz",
              _read_event("m-real", "2025-05-01T01:10:00Z"))  # fmt: skip
    _log_file(trail, ".123_CloudTrail_us-east-1_20250501T0100Z_a.json.gz",
              _read_event("m-hidden", "2025-05-01T01:11:00Z"))  # fmt: skip
    ledger = AccessLedger(tmp_path / "ledger")
    ledger.ingest_cloudtrail(tmp_path / "trail")
    assert ledger.read().column("record_id").to_pylist() == ["m-real"]


def test_the_s3_ledger_lives_under_its_states_parquet_prefix() -> None:
    """Attacks ``f"{base}/ledger"`` in `memlife/state/ledger.py::S3AccessLedger.__init__`:
    two deployments may share a bucket under two prefixes (``parquet=s3://b/a`` and
    ``s3://b/b``); a ledger that ignores the prefix mixes their tenants' reads (one
    deployment's recency scores and erasure scrubs reach the other's rows)."""
    from memlife.state import parse_state_url
    from memlife.state.dynamodb import DynamoState
    from memlife.state.ledger import S3AccessLedger
    from tests.support.aws_state import aws_state

    with aws_state("inprocess") as (url, state):
        other = parse_state_url(url.replace("s3://memlife-state/parts", "s3://memlife-state/b"))
        assert other is not None and other.parquet_bucket == state.settings.parquet_bucket
        mine, theirs = S3AccessLedger(state), S3AccessLedger(DynamoState(other))
        mine.append("u-1", "/users/u-1/facts", "m-1", at=datetime(2026, 5, 1, tzinfo=UTC))
        mine.flush()
        assert all(str(k).startswith("parts/ledger/date=") for k in mine.files())
        assert mine.read().num_rows == 1
        assert theirs.read().num_rows == 0 and not theirs.files()


# -- report folders and receipts-dataset keys -----------------------------------------------------


def test_two_attempts_of_one_run_write_two_report_folders(home: Path) -> None:
    """Attacks ``f"{started:%Y%m%dT%H%M%S%fZ}-{os.getpid()}"`` in `memlife/run_start.py::
    start_run` (reports are per attempt): a rerun of the same run (same id) started within
    the same second must not write into the first attempt's report folder."""
    from memlife.run_start import start_run
    from memlife.run_types import RunConfig

    config = RunConfig(dry_run=True, now=datetime(2026, 11, 1, 12, tzinfo=UTC))
    first, second = start_run(config), start_run(config)
    assert first.run_id == second.run_id
    assert first.report_dir != second.report_dir
    assert first.report_dir.parent == second.report_dir.parent == home / "reports" / first.run_id


def test_a_part_key_one_folder_deeper_is_no_receipts_dataset_part() -> None:
    """Attacks ``run_id=([^/]+)`` in `memlife/receipts_dataset.py::PART_KEY`: a run's
    partition is ONE folder under its day; a file a folder deeper (a copy placed inside a
    run's folder) read as a part would be counted as the run ``<run>/<folder>``."""
    from memlife.receipts_dataset import dataset_key, is_part_key

    key = dataset_key("20260601T000000Z-nightly-abc1234567", NOW)
    assert is_part_key(key)
    deeper = key.replace("/part-0.parquet", "/copy/part-0.parquet")
    assert not is_part_key(deeper)


# -- the store a URL names: part of every run id and receipts path -------------------------------


def test_two_spellings_of_one_sqlite_file_are_one_store(home: Path, tmp_path: Path) -> None:
    """Attacks ``.resolve()`` in `memlife/stores/__init__.py::store_identity` (in the run
    key): ``sqlite:///dir/a.db`` and ``sqlite:///dir/sub/../a.db`` are one file; a second
    spelling read as another store would run it again at the same cutoff as a new run
    (no rerun: a second manifest, a second receipt for the same records)."""
    from memlife.run_start import start_run
    from memlife.run_types import RunConfig

    (tmp_path / "sub").mkdir()
    now = datetime(2026, 11, 1, 12, tzinfo=UTC)
    plain = start_run(RunConfig(dry_run=True, now=now, store=f"sqlite:///{tmp_path}/a.db"))
    other = start_run(RunConfig(dry_run=True, now=now, store=f"sqlite:///{tmp_path}/sub/../a.db"))
    assert plain.run_id == other.run_id


def test_one_memory_id_in_two_regions_is_two_stores() -> None:
    """Attacks ``@{region}`` in `memlife/stores/__init__.py::store_identity`: AgentCore
    memory ids are per region; two memories sharing an id in two regions are two tenants'
    stores and must never share a run id (the run key holds the identity)."""
    from memlife.stores import store_identity

    east = store_identity("agentcore://mem-1?region=us-east-1")
    west = store_identity("agentcore://mem-1?region=eu-west-1")
    assert east != west
    assert store_identity("agentcore://mem-1?region=us-east-1&endpoint_url=http://x:1") == east


def test_receipts_history_until_alone_leaves_out_the_later_days(tmp_path: Path) -> None:
    """Attacks ``(until and day > until)`` in `memlife/receipts_history.py::partition_keys`:
    ``until`` without ``since`` lists every date folder (no per-day prefixes), so only this
    filter keeps a later day's runs out of a history asked to end before them."""
    from memlife.receipts_dataset import dataset_key
    from memlife.receipts_history import partition_keys

    sink = FileSink(tmp_path / "receipts")
    first, later = datetime(2026, 6, 1, tzinfo=UTC), datetime(2026, 6, 3, tzinfo=UTC)
    assert sink.put_new(dataset_key("20260601T000000Z-nightly-a", first), b"x")
    assert sink.put_new(dataset_key("20260603T000000Z-nightly-b", later), b"x")
    got = [run for _, run, _ in partition_keys(sink, until=first.date())]
    assert got == ["20260601T000000Z-nightly-a"]
