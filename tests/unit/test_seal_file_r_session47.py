"""Session 47 (audit 47r): the seal's adoption of a killed attempt's file (`audit.holds_exactly`, audits
47k and 47m) on the file receipt sink. A real night's operations and run secret, the real
FileSink; the seal is called as test_seal_unreadable_session47 calls it on S3."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlife.audit import FileSink
from memlife.evidence import seal
from memlife.journal import open_journal
from memlife.pipeline import RunConfig, run_local
from memlife.receipts_dataset import dataset_key
from memlife.stores.sqlite import SqliteStore
from tests.support.lifecycle import CUTOFF
from tests.unit.test_receipts_session43 import aws  # noqa: F401 (fixture)


@pytest.mark.parametrize("which", ["parquet", "dataset"])
def test_an_unreadable_entry_at_the_seals_key_on_the_file_sink_does_not_stop_the_seal(
    aws: Path,  # noqa: F811
    tmp_path: Path,
    which: str,
) -> None:
    """The adversary (another account on the receipts volume, or a killed tool) leaves an
    entry the writer cannot read at the seal's first name: here a folder named
    `operations.parquet` (or the dataset's `part-0.parquet`). Before audit 47k the seal moved
    on to the next name; audit 47m kept that for a 403 on S3. Must hold on the file sink
    too: the seal seals the run under a name it wrote itself, raising nothing (it raised
    IsADirectoryError out of `holds_exactly`, stopping the night's receipt)."""
    night = run_local(RunConfig(dry_run=False, now=CUTOFF, store=f"sqlite:///{aws}"))
    with SqliteStore(aws) as store:
        journal = open_journal(store)
        ops, secret = journal.by_run(night.run_id), journal.run_secret()
    assert ops
    sink, prefix = FileSink(tmp_path / "receipts"), f"runs/2026/11/01/{night.run_id}"
    taken = (
        f"{prefix}/operations.parquet" if which == "parquet" else dataset_key(night.run_id, CUTOFF)
    )
    (tmp_path / "receipts" / taken).mkdir(parents=True)
    evidence = seal(sink, prefix, ops, (night.run_id, CUTOFF, "apply"), secret=secret)
    assert evidence["parquet_key"] != f"{prefix}/operations.parquet" or which == "dataset"
    assert evidence["dataset_key"] != dataset_key(night.run_id, CUTOFF) or which == "parquet"
    assert sink.get(evidence["parquet_key"]) and sink.get(evidence["dataset_key"])
