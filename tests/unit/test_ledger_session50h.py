"""Audit 50h: the access ledger as a busy agent, a careless operator and a hostile caller
drive it (memlife/ledger.py, memlife/ledger_parts.py, memlife/state/ledger.py).

Findings, each on the real ledger (a folder, or moto S3 for the S3 ledger):

- a Parquet part that reads but is not the ledger's rows (columns in another order, an
  extra or a missing column, a null actor: a part written by DuckDB, Athena or by hand
  into the prefix the docs say those tools read) stopped the S3 ledger: every night's
  scoring, every erasure and every compaction raised a bare ``ValueError`` naming no
  part. The local ledger read it: a null actor's read was credited to another actor's
  record (the sort put it after that record's rows), and a missing column stopped every
  night's compaction;
- the S3 ledger's compaction deleted a part it could not read (named, then gone), where
  the local one leaves it for the operator;
- one bad ``append`` (a rank past int32, a bool rank, a None id) was buffered: every later
  flush of the process failed on it, so none of its accesses were ever written and the
  buffer grew with every recall.

Controls: a part another tool wrote in the ledger's own layout (nullable fields,
nanosecond times) is read on both ledgers; a part cut short is named and skipped; two real
processes logging at once lose and double nothing, through the night's compaction too.
"""

from __future__ import annotations

import io
import multiprocessing as mp
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from memlife.ledger import AccessLedger
from memlife.state.dynamodb import DynamoState
from memlife.state.ledger import S3AccessLedger
from tests.support.aws_state import aws_state

T0 = datetime(2026, 5, 1, 12, tzinfo=UTC)
DAY = "2026-05-01"
NS = "/users/u1/facts"


def _columns(**change: Any) -> dict[str, Any]:
    """One read of u1's r1 as another tool writes it: plain (nullable) Arrow columns."""
    cols: dict[str, Any] = {
        "actor_id": ["u1"],
        "namespace": [NS],
        "record_id": ["r1"],
        "accessed_at": pa.array([T0], pa.timestamp("us", tz="UTC")),
        "rank": pa.array([1], pa.int32()),
        "query_sha256": pa.array([None], pa.string()),
    }
    cols.update(change)
    return {k: v for k, v in cols.items() if v is not None}


FOREIGN = {
    "reordered": pa.table({k: _columns()[k] for k in ("record_id", "actor_id", "namespace",
                                                       "accessed_at", "rank", "query_sha256")}),
    "extra_column": pa.table(_columns(source=["duckdb"])),
    "missing_namespace": pa.table(_columns(namespace=None)),
    "null_actor": pa.table(_columns(actor_id=pa.array([None], pa.string()))),
}  # fmt: skip


def _parquet(table: pa.Table) -> bytes:
    buf = io.BytesIO()
    pq.write_table(table, buf)
    return buf.getvalue()


def _counts(stats: Any) -> dict[tuple[str, str], int]:
    return {k: v.count for k, v in stats.items()}


def _fill(ledger: AccessLedger) -> None:
    """Two flushes (two parts) of the day: u1 read r1 and r2, u2 read r2 after them."""
    ledger.append("u1", NS, "r1", at=T0)
    ledger.append("u1", NS, "r2", at=T0 + timedelta(minutes=1))
    ledger.flush()
    ledger.append("u2", "/users/u2/facts", "r2", at=T0 + timedelta(minutes=2))
    ledger.flush()


OWN = {("u1", "r1"): 1, ("u1", "r2"): 1, ("u2", "r2"): 1}


# -- the S3 ledger ---------------------------------------------------------------------------


@pytest.fixture()
def state() -> Iterator[DynamoState]:
    with aws_state("inprocess") as (_, st):
        yield st


def _s3_put(state: DynamoState, ledger: S3AccessLedger, name: str, body: bytes) -> str:
    key = f"{ledger.prefix}/date={DAY}/{name}"
    state.s3.put_object(Bucket=ledger.bucket, Key=key, Body=body)
    return key


def _fresh(state: DynamoState) -> S3AccessLedger:
    """Another worker (the next night): its own clients."""
    return S3AccessLedger(DynamoState(state.settings))


@pytest.mark.parametrize("kind", ["extra_column", "reordered"])
def test_the_ledgers_rows_in_another_column_layout_are_read_on_s3(
    state: DynamoState, kind: str
) -> None:
    """The local ledger reads such a part by column name; the S3 one raised on it."""
    ledger = S3AccessLedger(state)
    _fill(ledger)
    _s3_put(state, ledger, "part-by-hand.parquet", _parquet(FOREIGN[kind]))
    assert _counts(_fresh(state).actor_stats()) == {**OWN, ("u1", "r1"): 2}
    assert _fresh(state).erase(["r1"], actor_id="u1") == 2  # an erasure holds in it too
    assert _counts(_fresh(state).actor_stats()) == {("u1", "r2"): 1, ("u2", "r2"): 1}
    assert _fresh(state).compact() == {DAY: 2}


@pytest.mark.parametrize("kind", ["missing_namespace", "null_actor"])
def test_a_part_holding_no_ledger_rows_is_named_and_skipped_on_s3(
    state: DynamoState, kind: str
) -> None:
    ledger = S3AccessLedger(state)
    _fill(ledger)
    key = _s3_put(state, ledger, "part-by-hand.parquet", _parquet(FOREIGN[kind]))
    with pytest.warns(RuntimeWarning, match="part-by-hand"):
        assert _counts(_fresh(state).actor_stats()) == OWN  # the night scores the rest
    with pytest.warns(RuntimeWarning, match="part-by-hand"):
        assert _fresh(state).erase(["r2"], actor_id="u2") == 1  # an erasure still holds
    with pytest.warns(RuntimeWarning, match="part-by-hand"):
        _fresh(state).compact()
    state.s3.head_object(Bucket=ledger.bucket, Key=key)  # left for the operator, not deleted
    with pytest.warns(RuntimeWarning, match="part-by-hand"):
        assert _counts(_fresh(state).actor_stats()) == {("u1", "r1"): 1, ("u1", "r2"): 1}


def test_the_s3_compaction_leaves_a_part_it_cannot_read_where_it_is(state: DynamoState) -> None:
    ledger = S3AccessLedger(state)
    _fill(ledger)
    key = _s3_put(state, ledger, "part-cut.parquet", _parquet(FOREIGN["extra_column"])[:-40])
    with pytest.warns(RuntimeWarning, match="part-cut"):
        assert _fresh(state).compact() == {DAY: 2}  # the two readable parts are folded
    state.s3.head_object(Bucket=ledger.bucket, Key=key)  # as the local ledger leaves it


def test_a_part_another_tool_wrote_in_the_ledgers_layout_is_read_on_s3(
    state: DynamoState,
) -> None:
    """Control: nullable fields and nanosecond times are the ledger's rows all the same."""
    ledger = S3AccessLedger(state)
    _fill(ledger)
    other = _columns(accessed_at=pa.array([T0], pa.timestamp("ns", tz="UTC")))
    _s3_put(state, ledger, "part-duckdb.parquet", _parquet(pa.table(other)))
    assert _counts(_fresh(state).actor_stats()) == {**OWN, ("u1", "r1"): 2}
    assert _fresh(state).compact() == {DAY: 3}
    assert _counts(_fresh(state).actor_stats()) == {**OWN, ("u1", "r1"): 2}


# -- the local ledger ------------------------------------------------------------------------


@pytest.fixture()
def local(tmp_path: Path) -> AccessLedger:
    ledger = AccessLedger(tmp_path / "ledger", flush_seconds=None)
    _fill(ledger)
    return ledger


def _local_put(ledger: AccessLedger, name: str, body: bytes) -> Path:
    path = ledger.root / f"date={DAY}" / name
    path.write_bytes(body)
    return path


def test_a_read_naming_no_actor_is_credited_to_no_record(local: AccessLedger) -> None:
    _local_put(local, "part-by-hand.parquet", _parquet(FOREIGN["null_actor"]))
    with pytest.warns(RuntimeWarning, match="part-by-hand"):
        got = _counts(AccessLedger(local.root).actor_stats())
    assert got == OWN  # before: u2's r2 was read twice


def test_a_part_missing_a_column_is_named_and_the_rest_is_compacted(local: AccessLedger) -> None:
    part = _local_put(local, "part-by-hand.parquet", _parquet(FOREIGN["missing_namespace"]))
    with pytest.warns(RuntimeWarning, match="part-by-hand"):
        assert AccessLedger(local.root).compact() == {DAY: 2}
    assert part.exists()
    with pytest.warns(RuntimeWarning, match="part-by-hand"):
        assert _counts(AccessLedger(local.root).actor_stats()) == OWN


def test_a_part_cut_short_is_named_and_the_others_are_read(local: AccessLedger) -> None:
    """Control (session 43's rule, held): a torn part is named and left out, locally."""
    _local_put(local, "part-cut.parquet", _parquet(FOREIGN["extra_column"])[:-40])
    with pytest.warns(RuntimeWarning, match="part-cut"):
        assert _counts(AccessLedger(local.root).actor_stats()) == OWN


def test_a_part_another_tool_wrote_in_the_ledgers_layout_is_read_locally(
    local: AccessLedger,
) -> None:
    other = _columns(accessed_at=pa.array([T0], pa.timestamp("ns", tz="UTC")))
    _local_put(local, "part-duckdb.parquet", _parquet(pa.table(other)))
    assert _counts(AccessLedger(local.root).actor_stats()) == {**OWN, ("u1", "r1"): 2}
    assert AccessLedger(local.root).compact() == {DAY: 3}
    assert _counts(AccessLedger(local.root).actor_stats()) == {**OWN, ("u1", "r1"): 2}


# -- a hostile caller's append ---------------------------------------------------------------

POISON = {
    "rank_past_int32": {"rank": 2**31},
    "rank_a_bool": {"rank": True},
    "actor_none": {"actor_id": None},
    "namespace_none": {"namespace": None},
}


@pytest.mark.parametrize("kind", sorted(POISON))
def test_an_access_that_cannot_be_written_is_refused_at_append(tmp_path: Path, kind: str) -> None:
    ledger = AccessLedger(tmp_path / "ledger", flush_rows=3, flush_seconds=None)
    args: dict[str, Any] = {"actor_id": "u1", "namespace": NS, "record_id": "r0", **POISON[kind]}
    field = next(iter(POISON[kind]))
    with pytest.raises(ValueError, match=field):
        ledger.append(args.pop("actor_id"), args.pop("namespace"), args.pop("record_id"),
                      at=T0, **args)  # fmt: skip
    for i in range(5):  # the agent goes on recalling: its accesses are written
        ledger.append("u1", NS, f"r{i + 1}", rank=1, at=T0)
    ledger.flush()
    assert ledger.pending == 0
    assert len(_counts(AccessLedger(ledger.root).actor_stats())) == 5


def test_good_accesses_are_still_taken_with_or_without_a_rank(tmp_path: Path) -> None:
    ledger = AccessLedger(tmp_path / "ledger", flush_seconds=None)
    ledger.append("u1", NS, "r1", rank=2**31 - 1, at=T0)
    ledger.append("u1", NS, "r1", at=T0)  # a direct read has no rank
    assert ledger.flush() == 2


# -- two real processes logging at once ------------------------------------------------------


def _log_many(root: str, actor: str, n: int, start: Any, done: Any) -> None:
    try:
        ledger = AccessLedger(root, flush_rows=50, flush_seconds=None)
        start.wait(timeout=120)
        for i in range(n):
            ledger.append(actor, NS, f"r{i % 7}", rank=1 + i % 3, at=T0 + timedelta(seconds=i))
        ledger.close()
        done.put(n)
    except Exception as e:  # reported to the test, not lost in the child
        done.put(repr(e))


def test_two_processes_logging_at_once_lose_and_double_nothing(tmp_path: Path) -> None:
    """Control: each flush is its own part; the night's compaction folds them once."""
    root = tmp_path / "ledger"
    ctx = mp.get_context("spawn")
    n = 400
    start, done = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_log_many, args=(str(root), a, n, start, done))
             for a in ("u1", "u1")]  # fmt: skip
    for p in procs:
        p.start()
    results = [done.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert results == [n, n]
    before = _counts(AccessLedger(root).actor_stats())
    assert sum(before.values()) == 2 * n and len(before) == 7
    assert AccessLedger(root).compact() == {DAY: 16}  # 8 parts a process, folded once
    assert _counts(AccessLedger(root).actor_stats()) == before
