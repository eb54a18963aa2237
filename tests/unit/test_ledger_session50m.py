"""Audit 50m (session 50): mutation pass over audit 50h's ledger fixes.

Each test kills a mutant of memlife/ledger_parts.py or memlife/state/ledger.py that the
session's tests (tests/unit/test_ledger_session50h.py) let live, on the real ledgers: a
folder, or moto S3.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from memlife.ledger import AccessLedger
from memlife.state.dynamodb import DynamoState
from memlife.state.ledger import S3AccessLedger
from tests.unit.test_ledger_session50h import (  # noqa: F401
    DAY,
    NS,
    OWN,
    T0,
    _columns,
    _counts,
    _fill,
    _fresh,
    _local_put,
    _parquet,
    _s3_put,
    local,
    state,
)

# another tool's file whose columns are all there, one of another type: epoch seconds for
# the access time (an export from a log pipeline), an actor id written as a number
WRONG_TYPE = {
    "epoch_seconds": pa.table(_columns(accessed_at=pa.array([int(T0.timestamp())], pa.int64()))),
    "numeric_actor": pa.table(_columns(actor_id=pa.array([7], pa.int64()))),
}


@pytest.mark.parametrize("kind", sorted(WRONG_TYPE))
def test_a_column_of_another_type_is_named_and_skipped_locally(
    local: AccessLedger,  # noqa: F811
    kind: str,
) -> None:
    """Must hold: the part is named and left out, the ledger's own rows are read. Kills the
    mutant of ``foreign`` without its column-type check (the local ledger then raised on
    the part, or read epoch seconds as microseconds: a read in 1970)."""
    _local_put(local, "part-by-hand.parquet", _parquet(WRONG_TYPE[kind]))
    with pytest.warns(RuntimeWarning, match="part-by-hand"):
        assert _counts(AccessLedger(local.root).actor_stats()) == OWN


@pytest.mark.parametrize("kind", sorted(WRONG_TYPE))
def test_a_column_of_another_type_is_named_and_skipped_on_s3(
    state: DynamoState,  # noqa: F811
    kind: str,
) -> None:
    """The same on S3, where ``conform`` cast the column: epoch seconds became a read on
    1970-01-01 (or actor "7" got a read). Kills the same mutant."""
    ledger = S3AccessLedger(state)
    _fill(ledger)
    _s3_put(state, ledger, "part-by-hand.parquet", _parquet(WRONG_TYPE[kind]))
    with pytest.warns(RuntimeWarning, match="part-by-hand"):
        assert _counts(_fresh(state).actor_stats()) == OWN


POISON: dict[str, dict[str, Any]] = {
    "rank_zero": {"rank": 0},  # ranks count from 1 (the best hit)
    "record_id_empty": {"record_id": ""},
    "actor_empty": {"actor_id": ""},
}


@pytest.mark.parametrize("kind", sorted(POISON))
def test_an_access_with_an_empty_id_or_rank_zero_is_refused_at_append(
    tmp_path: Path, kind: str
) -> None:
    """Kills the mutants that allowed rank 0 or an empty (but str) id."""
    ledger = AccessLedger(tmp_path / "ledger", flush_seconds=None)
    args: dict[str, Any] = {"actor_id": "u1", "namespace": NS, "record_id": "r0", **POISON[kind]}
    with pytest.raises(ValueError, match=next(iter(POISON[kind]))):
        ledger.append(**args, at=T0)


def test_control_the_largest_int32_rank_is_written(tmp_path: Path) -> None:
    """Control at the boundary: rank 2**31-1 is a ledger row (and 2**31 is not: the
    session's test)."""
    ledger = AccessLedger(tmp_path / "ledger", flush_seconds=None)
    ledger.append("u1", NS, "r1", rank=2**31 - 1, at=T0)
    ledger.flush()
    assert _counts(AccessLedger(ledger.root).actor_stats()) == {("u1", "r1"): 1}
    assert DAY in {p.parent.name.removeprefix("date=") for p in ledger.root.rglob("*.parquet")}


def test_a_null_actor_in_a_later_row_group_is_named_and_skipped_locally(
    local: AccessLedger,  # noqa: F811
) -> None:
    """Another tool wrote its part in row groups of one row: the null actor is in the
    first, the second is whole. Must hold: the footer's null counts are summed over the
    row groups and the part is skipped (a null actor's read credited to a neighbouring
    record: the session's finding). Kills the mutant that kept the last group's count."""
    import io

    import pyarrow.parquet as pq

    table = pa.concat_tables([
        pa.table(_columns(actor_id=pa.array([None], pa.string()))),
        pa.table(_columns()),
    ])  # fmt: skip
    buf = io.BytesIO()
    pq.write_table(table, buf, row_group_size=1)
    assert pq.ParquetFile(io.BytesIO(buf.getvalue())).metadata.num_row_groups == 2
    _local_put(local, "part-by-hand.parquet", buf.getvalue())
    with pytest.warns(RuntimeWarning, match="part-by-hand"):
        assert _counts(AccessLedger(local.root).actor_stats()) == OWN
