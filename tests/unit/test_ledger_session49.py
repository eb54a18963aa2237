"""Audit 49d (session 49): the access ledger as a dry run reads it.

A dry run with ``--cloudtrail`` reads the log files not ingested yet in memory
(``run_start._cloudtrail_preview``) and must score the accesses the apply run will. The
ingest reads a log file's bytes once whatever its key (``ledger_ingest.content_id``: a
moved folder, an ``aws s3 sync`` copy), but the preview went by key only: a copy of a
file counted its reads twice, and a file ingested once and then moved counted them again
on top of the ledger's rows. The dry run scored (and so proposed) on accesses the apply
run never counts.
"""

from __future__ import annotations

import gzip
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memlife.ledger import AccessLedger
from memlife.run_start import load_access_stats

CUTOFF = datetime(2026, 12, 1, tzinfo=UTC)
NAME = "111_CloudTrail_us-east-1_20261130T0000Z_x.json.gz"


def _get(rid: str) -> dict[str, Any]:
    return {
        "eventSource": "bedrock-agentcore.amazonaws.com", "eventName": "GetMemoryRecord",
        "eventTime": "2026-11-30T00:00:00Z", "requestParameters": {"memoryRecordId": rid},
        "responseElements": {"memoryRecord": {"memoryRecordId": rid,
                                              "namespaces": ["/users/u-2/preferences"]}},
    }  # fmt: skip


def _trail(root: Path, *folders: str) -> Path:
    """One log file (two reads of m-1, one of m-2), the same bytes under each folder."""
    body = gzip.compress(json.dumps({"Records": [_get("m-1"), _get("m-1"), _get("m-2")]}).encode())
    for folder in folders:
        (root / folder).mkdir(parents=True, exist_ok=True)
        (root / folder / NAME).write_bytes(body)
    return root


def _counts(stats: dict[tuple[str, str], Any]) -> dict[str, int]:
    return {rid: times.count for (_, rid), times in stats.items()}


def test_a_dry_run_counts_a_log_file_and_its_copy_once_as_the_apply_run_does(
    home: Path, tmp_path: Path
) -> None:
    trail = _trail(tmp_path / "trail", "a", "b")  # the file and a synced copy
    dry = load_access_stats(CUTOFF, None, str(trail), dry_run=True)
    assert not (home / "ledger").exists()  # a dry run writes nothing
    applied = load_access_stats(CUTOFF, None, str(trail))
    assert _counts(applied) == {"m-1": 2, "m-2": 1}  # the ingest reads the bytes once
    assert _counts(dry) == _counts(applied)


def test_a_dry_run_after_the_trail_moved_counts_no_read_twice(home: Path, tmp_path: Path) -> None:
    old = _trail(tmp_path / "old", "a")
    AccessLedger(home / "ledger").ingest_cloudtrail(old)  # last night's run read it
    new = tmp_path / "new"
    shutil.copytree(old, new)  # the folder moved (or was synced elsewhere)
    dry = load_access_stats(CUTOFF, None, str(new), dry_run=True)  # tonight's, then applied
    applied = load_access_stats(CUTOFF, None, str(new))
    assert _counts(applied) == {"m-1": 2, "m-2": 1}
    assert _counts(dry) == _counts(applied)


def test_a_dry_run_counts_two_different_files_both(home: Path, tmp_path: Path) -> None:
    """The control: files with other bytes are other reads, in the dry run as applied."""
    trail = _trail(tmp_path / "trail", "a")
    other = gzip.compress(json.dumps({"Records": [_get("m-3")]}).encode())
    (trail / "b").mkdir()
    (trail / "b" / NAME).write_bytes(other)
    dry = load_access_stats(CUTOFF, None, str(trail), dry_run=True)
    assert _counts(dry) == {"m-1": 2, "m-2": 1, "m-3": 1}
    assert _counts(load_access_stats(CUTOFF, None, str(trail))) == _counts(dry)
