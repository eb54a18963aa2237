"""Audit 49i: `memlife import --access FILE` and the times of a hostile Parquet file.

A record's time without a zone is refused ("a naive timestamp is an error, not a guess",
memlife/model.py), and so is an access file whose ``accessed_at`` is text without a zone
(Arrow: "expected a zone offset"). The same times as a Parquet timestamp column without a
zone (what pandas, DuckDB's TIMESTAMP or Spark's INT96 give) were taken as UTC: reads
written in local time moved by the zone's offset, with no word. Such a column is refused
by name now, before any record is imported; a column with any zone is read as it says.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from memlife.cli import app
from memlife.ledger import AccessLedger, query_sha256
from memlife.stores.sqlite import SqliteStore
from tests.support.records import good

BORN = datetime(2026, 1, 2, 10, 0, tzinfo=UTC)  # good()'s created_at
QS = query_sha256("what do I drink?")
READS = [BORN + timedelta(hours=1), BORN + timedelta(hours=2)]


def _file(path: Path, accessed_at: pa.Array) -> Path:
    pq.write_table(
        pa.table({
            "actor_id": ["u-1", "u-1"], "namespace": ["/users/u-1/preferences"] * 2,
            "record_id": ["m-1", "m-1"], "accessed_at": accessed_at,
            "rank": pa.array([1, 1], pa.int32()), "query_sha256": [QS, QS],
        }),
        path,
    )  # fmt: skip
    return path


def _import(tmp_path: Path, reads: Path) -> tuple[int, str]:
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(good("m-1")) + "\n")
    res = CliRunner().invoke(app, ["import", str(src), "--access", str(reads)])
    return res.exit_code, res.output


@pytest.mark.parametrize("zone", ["UTC", "+05:30", "America/New_York"])
def test_a_timestamp_column_with_a_zone_is_read_as_it_says(
    home: Path, tmp_path: Path, zone: str
) -> None:
    """Control: any zone names the instant; the ledger holds the same two reads."""
    micros = [int(t.timestamp() * 1e6) for t in READS]
    reads = _file(tmp_path / "z.parquet", pa.array(micros, pa.timestamp("us", tz=zone)))
    code, output = _import(tmp_path, reads)
    assert code == 0, output
    got = AccessLedger(home / "ledger").read()["accessed_at"].to_pylist()
    assert sorted(got) == READS


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
def test_a_timestamp_column_without_a_zone_is_refused_by_name(
    home: Path, tmp_path: Path, unit: str
) -> None:
    """The reads were written as Berlin wall-clock times without a zone: taken as UTC they
    would land an hour late. Refused by column, as zone-less text is, and nothing imported."""
    local = [(t + timedelta(hours=1)).replace(tzinfo=None) for t in READS]
    reads = _file(tmp_path / "naive.parquet", pa.array(local, pa.timestamp(unit)))
    code, output = _import(tmp_path, reads)
    assert code == 2, output
    assert "accessed_at" in output and "zone" in output
    db = home / "memlife.db"
    assert not db.exists() or SqliteStore(db).get("m-1") is None
    assert AccessLedger(home / "ledger").read().num_rows == 0


def test_zone_less_text_in_the_same_column_is_refused(home: Path, tmp_path: Path) -> None:
    """Control: the text form of the same times is refused already (Arrow's cast)."""
    text = [t.replace(tzinfo=None).isoformat() for t in READS]
    code, output = _import(tmp_path, _file(tmp_path / "text.parquet", pa.array(text)))
    assert code == 2 and "accessed_at" in output and "zone" in output, output
