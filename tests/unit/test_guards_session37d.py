"""Guards left untested by the twenty-fifth audit (session 37): state kept off the worker
(side tables, tombstones, the state-table lease and store binding, the embedding cache,
reports and the ledger on S3), the AgentCore sidecar, and recall's coarse pass."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import numpy as np
import pytest
from moto import mock_aws

import memlife.coarse as coarse_module
import memlife.retrieval as retrieval
from memlife import tombstones
from memlife.coarse import SignCodes
from memlife.model import MemoryRecord, content_sha256
from memlife.retrieval import rank
from memlife.state import StateSettingsError, parse_state_url
from memlife.state.dynamodb import DynamoState
from memlife.state.embeddings import DynamoEmbeddingCache
from memlife.state.ledger import S3AccessLedger
from memlife.state.reports import (
    delete_outcomes,
    download_parts,
    report_prefix,
    upload_part,
    upload_report,
)
from memlife.stores.agentcore_sidecar import Sidecar, SidecarItem
from tests.support.aws_state import CREDENTIALS, aws_state
from tests.unit.test_embed_cache import CountingEmbedder, recs

T0 = datetime(2026, 11, 1, 9, tzinfo=UTC)

# ---------------------------------------------------------------------------------------
# memlife/coarse.py and its caller retrieval._pool


def _unit_rows(n: int, dim: int = 64, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.standard_normal((n, dim)).astype(np.float32)
    return np.ascontiguousarray(v / np.linalg.norm(v, axis=1, keepdims=True))


@pytest.fixture()
def small_coarse(monkeypatch: pytest.MonkeyPatch) -> None:
    """The coarse path for sets of 100 rows or more, re-ranking only a few candidates."""
    monkeypatch.setattr(retrieval, "COARSE_MIN_ROWS", 100)
    monkeypatch.setattr(coarse_module, "COARSE_CANDIDATES", 4)


def test_codes_of_a_smaller_set_never_hide_a_row_added_since(small_coarse: None) -> None:
    """Attacks ``len(coarse) == n`` in `memlife/retrieval.py::_pool`: codes built before a
    row was added would estimate only the old rows, so the new best row (the query itself)
    could never be a candidate. Out of step, the exact product over every row is used."""
    vecs = _unit_rows(300)
    codes = SignCodes(vecs[:299])
    q = vecs[299]
    exact = rank(q, vecs, k=3, centroid_weight=0)
    assert exact.indices[0] == 299
    got = rank(q, vecs, k=3, centroid_weight=0, coarse=codes)
    assert list(got.indices) == list(exact.indices)


def test_codes_of_a_larger_set_never_name_a_removed_row(small_coarse: None) -> None:
    """Attacks ``len(coarse) == n`` in `memlife/retrieval.py::_pool` from the other side:
    codes still holding a removed row (the set shrank) must not choose rows past the end."""
    vecs = _unit_rows(300)
    codes = SignCodes(vecs)
    live = vecs[:250]
    for q in vecs[250:260]:  # each query is a removed row: its code estimates best
        got = rank(q, live, k=3, centroid_weight=0, coarse=codes)
        assert list(got.indices) == list(rank(q, live, k=3, centroid_weight=0).indices)


def test_too_few_candidates_over_the_threshold_falls_back_to_every_row(
    small_coarse: None,
) -> None:
    """Attacks ``if len(pool) < m: return None`` in `memlife/coarse.py::rerank_coarse`: the
    candidates (chosen mostly by a heavy lexical term) hold no row over the threshold; the
    rows that pass are elsewhere and must still be returned, as by the exact ranking."""
    n, dim = 300, 64
    vecs = _unit_rows(n, dim)
    q = np.zeros(dim, np.float32)
    q[0] = 1.0
    near = [10, 20, 30]
    for i in near:  # close to the query, none of its words
        v = q + 0.2 * vecs[i]
        vecs[i] = v / np.linalg.norm(v)
    texts = ["bicycle museum lisbon" if i not in near else "oslo dentist" for i in range(n)]
    kw: dict[str, Any] = {"k": 3, "threshold": 0.5, "query_text": "bicycle", "texts": texts}
    exact = rank(q, vecs, lexical_weight=5.0, centroid_weight=0, **kw)
    assert sorted(exact.indices) == near
    got = rank(q, vecs, lexical_weight=5.0, centroid_weight=0, coarse=SignCodes(vecs), **kw)
    assert list(got.indices) == list(exact.indices)


def test_equal_scores_come_back_in_row_order_as_the_exact_ranking(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Attacks ``np.sort`` of the candidate rows in `memlife/coarse.py::rerank_coarse`: the
    exact ranking breaks ties by lower row; the re-rank must too (rows in index order)."""
    monkeypatch.setattr(retrieval, "COARSE_MIN_ROWS", 100)
    monkeypatch.setattr(coarse_module, "COARSE_CANDIDATES", 10**6)
    base = _unit_rows(200, seed=3)
    vecs = np.ascontiguousarray(np.repeat(base, 2, axis=0))  # rows 2t and 2t+1 equal
    codes = SignCodes(vecs)
    for q in _unit_rows(20, seed=4):
        exact = rank(q, vecs, k=40, centroid_weight=0)
        got = rank(q, vecs, k=40, centroid_weight=0, coarse=codes)
        assert list(got.indices) == list(exact.indices)


def test_the_estimate_keeps_the_scale_of_the_exact_product() -> None:
    """Attacks ``est *= |R w|`` in `memlife/coarse.py::SignCodes.estimate`: the estimate
    replaces the dense term next to exact lexical and date terms, so it must estimate
    ``v . w`` itself (rank passes a centroid-corrected ``w`` far from unit length), not
    merely its order: the fit of the estimate on the exact product has slope about 1."""
    vecs = _unit_rows(4000, 128, seed=5)
    codes = SignCodes(vecs)
    for scale in (0.25, 3.0):
        w = scale * _unit_rows(1, 128, seed=6)[0]
        exact, est = vecs @ w, codes.estimate(w)
        slope = float(np.cov(est, exact)[0, 1] / np.var(exact, ddof=1))
        assert 0.7 < slope < 1.3, (scale, slope)


def test_with_every_row_a_candidate_all_but_the_last_rank_as_exactly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Attacks the slice ``[len(est) - take :]`` in `memlife/coarse.py::rerank_coarse`: the
    ``take`` best estimated rows are re-ranked, not one fewer. With every row a candidate,
    asking for all rows but one is the exact ranking (one row short, the row the estimate
    puts last would be missing even where the exact score ranks it higher)."""
    monkeypatch.setattr(retrieval, "COARSE_MIN_ROWS", 100)
    monkeypatch.setattr(coarse_module, "COARSE_CANDIDATES", 10**6)
    vecs = _unit_rows(200, seed=7)
    codes = SignCodes(vecs)
    for q in _unit_rows(10, seed=8):
        exact = rank(q, vecs, k=199, centroid_weight=0)
        got = rank(q, vecs, k=199, centroid_weight=0, coarse=codes)
        assert list(got.indices) == list(exact.indices)


# ---------------------------------------------------------------------------------------
# memlife/state/ledger.py: the access ledger on S3


@pytest.fixture()
def s3_ledger(monkeypatch: pytest.MonkeyPatch) -> Iterator[S3AccessLedger]:
    with aws_state("inprocess", table="ledger-37d") as (_, state):
        yield S3AccessLedger(state)


def _fill(ledger: S3AccessLedger, flushes: int = 4) -> None:
    for i in range(flushes):  # one small part per flush, all on one day
        ledger.append("u-1", "/users/u-1/facts", f"m-{i % 2}", at=T0 + timedelta(hours=i))
        ledger.append("u-2", "/users/u-2/facts", "m-9", at=T0 + timedelta(hours=i))
        ledger.flush()


def _bodies(ledger: S3AccessLedger) -> list[bytes]:
    s3 = ledger.state.s3
    return [s3.get_object(Bucket=ledger.bucket, Key=k)["Body"].read() for k in ledger.files()]


def _crash_on_delete(monkeypatch: pytest.MonkeyPatch, ledger: S3AccessLedger) -> None:
    def crash(keys: Iterable[str]) -> None:
        if list(keys):  # the sweep's delete of nothing is no write
            raise ConnectionError("worker killed after the replacing part was written")

    monkeypatch.setattr(ledger, "_delete", crash)


def test_a_crash_mid_erase_counts_no_kept_row_twice(
    s3_ledger: S3AccessLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks the ``[part]`` an erase's rewrite names in `memlife/state/ledger.py::
    S3AccessLedger._replace_part`: a crash between the rewritten part and the delete leaves
    both; readers must skip the old one, or every kept access counts twice."""
    _fill(s3_ledger)
    before = s3_ledger.access_stats()
    _crash_on_delete(monkeypatch, s3_ledger)
    with pytest.raises(ConnectionError):
        s3_ledger.erase(["m-9"])
    monkeypatch.undo()
    after = S3AccessLedger(s3_ledger.state).access_stats()  # another worker reads
    assert (after["m-0"], after["m-1"]) == (before["m-0"], before["m-1"])
    assert after["m-9"][1] == 3  # the one part rewritten before the crash lost m-9 once


def test_an_erasure_after_a_crashed_compaction_leaves_no_copy_on_s3(
    s3_ledger: S3AccessLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Erasure reaches every copy: a compaction killed after its folded part was written
    leaves the source parts on S3 (replaced by it, skipped by readers). Erasing m-9 then
    rewrites the live folded part and deletes it: nothing names the sources any more, so
    they were live again, with m-9's rows in them (and every other access twice), until
    session 37 gave the S3 ledger its own sweep. Fails on the old code."""
    _fill(s3_ledger)
    _crash_on_delete(monkeypatch, s3_ledger)
    with pytest.raises(ConnectionError):
        s3_ledger.compact()
    monkeypatch.undo()
    assert s3_ledger.erase(["m-9"]) == 4
    assert "m-9" not in s3_ledger.access_stats()  # readers no longer see it...
    assert not [b for b in _bodies(s3_ledger) if b"m-9" in b]  # ...and no object holds it


def test_an_erase_rerun_after_its_crash_leaves_no_copy_on_s3(
    s3_ledger: S3AccessLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Erasure reaches every copy, across a crash: the first attempt wrote a part without
    m-9 and was killed before deleting the one it replaces; the rerun finishes the live
    parts, yet the replaced part (still holding m-9) was left for good. Fails on the old code."""
    _fill(s3_ledger)
    _crash_on_delete(monkeypatch, s3_ledger)
    with pytest.raises(ConnectionError):
        s3_ledger.erase(["m-9"])
    monkeypatch.undo()
    S3AccessLedger(s3_ledger.state).erase(["m-9"])
    assert "m-9" not in s3_ledger.access_stats()
    assert not [b for b in _bodies(s3_ledger) if b"m-9" in b]


# ---------------------------------------------------------------------------------------
# memlife/state/side.py, embeddings.py, reports.py on DynamoDB / S3 (moto in process)


@pytest.fixture()
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[DynamoState]:
    import memlife.state as state_mod

    with aws_state("inprocess") as (url, state):
        monkeypatch.setenv("MEMLIFE_STATE", url)
        monkeypatch.setattr(state_mod, "_open", {url: state})
        yield state


class _RemoteStore:
    """A store without a SQLite file of its own (AgentCore-like)."""

    connection = None


def _rec(rid: str, content: str, actor: str = "u-1", sha: str | None = None) -> MemoryRecord:
    r = recs(content)[0]
    prov = r.provenance.model_copy(update={"content_sha256": sha})
    return r.model_copy(update={"id": rid, "actor_id": actor, "provenance": prov})


def test_a_tombstone_of_a_recorded_hash_refuses_a_record_naming_that_hash(aws: object) -> None:
    """Attacks ``r.provenance.content_sha256`` in the hashes `memlife/state/side.py::
    DynamoTombstones.tombstone_refusal` checks: an erased record's recorded hash (its
    ``#recorded`` tombstone) refuses a record that carries that hash, whatever its text."""
    store: Any = _RemoteStore()
    erased = _rec("m-1", "Drinks only green tea.", sha=content_sha256("Drank green tea once."))
    tombstones.add(store, [erased])
    carrier = _rec("m-2", "Likes jazz records.", sha=content_sha256("Drank green tea once."))
    assert tombstones.refusal(store, carrier) == "ERASED_CONTENT"
    assert tombstones.refusal(store, _rec("m-3", "Likes jazz records.")) is None
    other = _rec(
        "m-4", "Likes jazz records.", actor="u-2", sha=content_sha256("Drank green tea once.")
    )
    assert tombstones.refusal(store, other) is None  # per actor


def test_a_record_with_erased_text_is_refused_whatever_hash_it_carries(aws: object) -> None:
    """Attacks the computed ``content_sha256(r.content)`` among the hashes
    `memlife/state/side.py::DynamoTombstones.tombstone_refusal` checks: text that folds to
    nothing has no folded tombstone, so the exact hash of the text is the only match left
    when the record carries a stale recorded hash."""
    store: Any = _RemoteStore()
    tombstones.add(store, [_rec("m-1", "🎉🎉🎉")])
    stale = _rec("m-2", "🎉🎉🎉", sha=content_sha256("an older text"))
    assert tombstones.refusal(store, stale) == "ERASED_CONTENT"


def test_delete_for_forgets_the_in_process_copy_of_an_erased_vector(aws: DynamoState) -> None:
    """Attacks ``self._forget_recent(shas)`` in `memlife/state/embeddings.py::
    DynamoEmbeddingCache.delete_for`: with ``recent`` on, an erased content's vector also
    lives in the process; after delete_for it must be computed again, not served."""
    emb = CountingEmbedder()
    cache = DynamoEmbeddingCache(aws, emb, recent=16)
    cache.get_or_embed_texts(["alpha", "beta"])
    assert cache.delete_for([content_sha256("alpha")]) == 1
    cache.get_or_embed_texts(["alpha", "beta"])
    assert emb.texts == ["alpha", "beta", "alpha"]  # alpha embedded again; beta kept


def test_the_uploaded_report_removes_the_merged_child_parts(
    aws: DynamoState, tmp_path: Path
) -> None:
    """Attacks the delete of ``merged_parts`` in `memlife/state/reports.py::upload_report`:
    the merged report holds the children's rows; the parts must not stay on S3 beside it."""
    part = tmp_path / "part.jsonl"
    part.write_text('{"record_id": "m-1"}\n')
    keys = [upload_part(aws, "run-1", T0, "a1", p, part) for p in ("b0", "b1")]
    got = download_parts(aws, "run-1", T0, "a1", tmp_path / "merged")
    assert len(got) == 2 and len(keys) == 2
    report = tmp_path / "report"
    report.mkdir()
    (report / "proposed-actions.jsonl").write_text("{}\n")
    (report / "proposed-actions.parquet").write_bytes(b"PAR1")
    upload_report(aws, "run-1", T0, "a1", report / "proposed-actions.jsonl",
                  report / "proposed-actions.parquet", got)  # fmt: skip
    assert download_parts(aws, "run-1", T0, "a1", tmp_path / "again") == []
    assert download_parts(aws, "run-1", T0, "a2", tmp_path / "other") == []  # per attempt


def test_delete_outcomes_removes_the_attempts_outcomes_only(aws: DynamoState) -> None:
    """Attacks the delete in `memlife/state/reports.py::delete_outcomes`: the child outcomes
    hold staged replacement texts and must be gone once the receipt is written; another
    attempt's outcomes stay."""
    bucket = aws.settings.parquet_bucket
    for attempt in ("a1", "a2"):
        prefix = report_prefix(aws, "run-1", T0, attempt)
        for part in ("b0", "b1"):
            aws.s3.put_object(Bucket=bucket, Key=f"{prefix}/outcomes/{part}.pickle", Body=b"x")
    assert delete_outcomes(aws, "run-1", T0, "a1") == 2
    left = aws.s3.list_objects_v2(Bucket=bucket).get("Contents", [])
    assert sorted(o["Key"].split("/")[-3] for o in left) == ["attempt=a2", "attempt=a2"]


@pytest.mark.parametrize("parquet", ["s3:///reports", "s3://"])
def test_a_state_url_without_a_parquet_bucket_is_refused(parquet: str) -> None:
    """Attacks ``not pp.netloc`` in `memlife/state/__init__.py::parse_state_url`: the
    ledger and the reports need a bucket; an empty one must be refused up front."""
    with pytest.raises(StateSettingsError, match="parquet"):
        parse_state_url(f"dynamodb://t?region=us-east-1&parquet={parquet}")


def test_a_sqlite_store_keeps_its_side_tables_in_its_file_whatever_the_state(
    aws: DynamoState, tmp_path: Path
) -> None:
    """Attacks the ``connection`` check in `memlife/state/__init__.py::uses_remote_state`:
    a SQLite store's snapshots and pending erasures share its file (one backup, one erasure
    and one transaction cover both), even with MEMLIFE_STATE set; nothing goes to the table."""
    from memlife.state import uses_remote_state
    from memlife.state.side import SqliteSideTables, side_tables
    from memlife.stores.sqlite import SqliteStore

    with SqliteStore(tmp_path / "store.db") as store:
        assert uses_remote_state(store) is None
        side = side_tables(store)
        assert isinstance(side, SqliteSideTables) and side.connection is store.connection
        side.put_snapshot("m-1", ("active", None, "{}"), "t")
    assert aws.ddb.scan(TableName=aws.table)["Items"] == []


# ---------------------------------------------------------------------------------------
# memlife/stores/agentcore_sidecar.py: the sidecar table behind real boto3 (moto)


@pytest.fixture()
def sidecar(monkeypatch: pytest.MonkeyPatch) -> Iterator[Sidecar]:
    for k, v in CREDENTIALS.items():
        monkeypatch.setenv(k, v)
    with mock_aws():
        table = Sidecar(boto3.client("dynamodb", region_name="us-east-1"), "sidecar-37d")
        table.create_table()
        yield table


def _item(key: str, version: int, actor: str = "u-1", mrid: str | None = "mr-1") -> SidecarItem:
    return SidecarItem(key, key, actor, f"/users/{actor}", version, mrid)


def test_sidecar_writes_are_conditional_on_the_version_read(sidecar: Sidecar) -> None:
    """Attacks both conditions of `memlife/stores/agentcore_sidecar.py::Sidecar._put_one`
    (``attribute_not_exists`` for a first write, ``version = :v`` after) and its CONFLICT
    code: a writer that lost the race is told so, never silently overwrites the winner."""
    assert sidecar.put_many([(_item("r1", 1, mrid="mr-a"), 0)]) == {}
    assert sidecar.put_many([(_item("r1", 1, mrid="mr-b"), 0)]) == {"r1": "CONFLICT"}
    assert sidecar.put_many([(_item("r1", 2, mrid="mr-c"), 1)]) == {}
    assert sidecar.put_many([(_item("r1", 2, mrid="mr-d"), 1)]) == {"r1": "CONFLICT"}
    got = sidecar.get("r1")
    assert got is not None and (got.version, got.memory_record_id) == (2, "mr-c")


def test_a_live_sidecar_item_keeps_no_create_nonce(sidecar: Sidecar) -> None:
    """Attacks the ``elif`` in `memlife/stores/agentcore_sidecar.py::_to_ddb`: the nonce
    names a create in flight; once the record is live it must not be kept (a later create
    of the same id is a new attempt)."""
    pending = _item("r2", 1, mrid=None)
    pending.create_nonce = "n-1"
    sidecar.put_many([(pending, 0)])
    got = sidecar.get("r2")
    assert got is not None and got.pending and got.create_nonce == "n-1"
    live = _item("r2", 2, mrid="mr-2")
    live.create_nonce = "n-1"
    sidecar.put_many([(live, 1)])
    got = sidecar.get("r2")
    assert got is not None and not got.pending and got.create_nonce is None


def test_sidecar_namespaces_are_per_actor_and_batches_fit_the_limits(sidecar: Sidecar) -> None:
    """Attacks the ``ns#{actor}`` key in `Sidecar.register_shards` (one actor's namespaces
    never listed for another) and the chunking of `Sidecar.get_many` (100 keys a
    BatchGetItem: more is refused) and `Sidecar.delete_many` over many keys."""
    sidecar.register_shards([("u-1", "/users/u-1"), ("u-2", "/users/u-2"), ("u-1", "/t/u-1")])
    assert sorted(sidecar.actors()) == ["u-1", "u-2"]
    assert sorted(sidecar.namespaces("u-1")) == ["/t/u-1", "/users/u-1"]
    assert sidecar.namespaces("u-2") == ["/users/u-2"]
    keys = [f"k{i}" for i in range(130)]
    assert sidecar.put_many([(_item(k, 1), 0) for k in keys]) == {}
    assert len(sidecar.get_many(keys)) == 130
    sidecar.delete_many(keys[:60])
    assert sorted(sidecar.get_many(keys)) == sorted(keys[60:])


def test_an_unreachable_sidecar_is_a_store_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Attacks ``except BotoCoreError`` in `memlife/stores/agentcore_sidecar.py::
    _store_errors`: a sidecar that cannot be reached stops the shard with a StoreError
    (SIDECAR_UNAVAILABLE), never a raw botocore error mid-run."""
    from botocore.config import Config

    from memlife.stores.base import StoreError

    for k, v in CREDENTIALS.items():
        monkeypatch.setenv(k, v)
    client = boto3.client(
        "dynamodb",
        region_name="us-east-1",
        endpoint_url="http://127.0.0.1:9",  # the discard port: nothing listens
        config=Config(retries={"max_attempts": 1}, connect_timeout=2, read_timeout=2),
    )
    with pytest.raises(StoreError) as info:
        Sidecar(client, "sidecar-37d").get("r1")
    assert info.value.code == "SIDECAR_UNAVAILABLE"


def test_a_holder_taking_its_own_lease_again_reports_no_takeover(aws: DynamoState) -> None:
    """Attacks ``old["holder"]["S"] == self.holder`` in `memlife/state/lease.py::
    DynamoLease.acquire`: a resumed holder took over nobody (its receipt must not name
    itself as a dead run it replaced); a takeover of another's expired lease names it."""
    from memlife.state.lease import DynamoLease

    mine = DynamoLease(aws, "agentcore://mem-1@us-east-1", "run-a@host:1", ttl_s=-5)
    assert mine.acquire("run-a") is None
    assert mine.acquire("run-a") is None  # ours, even expired: no takeover
    taker = DynamoLease(aws, "agentcore://mem-1@us-east-1", "run-b@host:2", ttl_s=60)
    old = taker.acquire("run-b")
    assert old is not None and old["owner"] == "run-a@host:1"


def test_erasing_every_row_of_the_s3_ledger_leaves_no_part(s3_ledger: S3AccessLedger) -> None:
    """Attacks ``if rest.num_rows`` in `memlife/state/ledger.py::S3AccessLedger.
    _replace_part`: a part left empty by an erasure is removed, not rewritten empty."""
    _fill(s3_ledger)
    assert s3_ledger.erase(["m-0", "m-1", "m-9"]) == 8
    assert s3_ledger.files() == []


def test_a_home_bound_first_by_another_store_is_not_taken(tmp_path: Path) -> None:
    """Attacks ``except FileExistsError: return _read(path)`` in `memlife/state/home.py::
    _bind`: a writer whose link lost the race learns who bound the home (and is refused
    by check_home), instead of believing it bound it itself."""
    from memlife.state.home import FILENAME, _bind

    path = tmp_path / FILENAME
    path.write_text("agentcore://mem-a@us-east-1\n", encoding="utf-8")
    assert _bind(path, "agentcore://mem-b@us-east-1") == "agentcore://mem-a@us-east-1"
    assert path.read_text(encoding="utf-8").strip() == "agentcore://mem-a@us-east-1"


def test_a_dry_run_opens_no_side_file_under_the_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Attacks ``if not create and not path.exists(): return _memory(schema)`` in
    `memlife/state/local.py::side_connection`: a reader of a store without a file of its
    own gets empty tables and leaves nothing under MEMLIFE_HOME."""
    from memlife.state.local import side_connection
    from memlife.state.side import SQLITE_SCHEMA

    monkeypatch.delenv("MEMLIFE_STATE", raising=False)
    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path))
    conn, _ = side_connection(
        _RemoteStore(), "quarantine.db", SQLITE_SCHEMA, "quarantine_snapshots", create=False
    )
    assert conn.execute("SELECT count(*) FROM quarantine_snapshots").fetchone() == (0,)
    assert not (tmp_path / "quarantine.db").exists()
