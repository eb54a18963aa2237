"""A sealed nightly run to tamper with: a seeded store applied once, receipts on disk."""

from __future__ import annotations

import os
from pathlib import Path

from memlife.pipeline import RunConfig, run_local
from tests.support.lifecycle import CUTOFF, seed


def sealed_nightly_run(base: Path) -> dict:
    """Seed ``base``/memlife.db, apply one night (deletes included), receipts under
    ``base``/receipts; returns the base, the run id and the run receipt's path."""
    os.environ["MEMLIFE_HOME"] = str(base)
    try:
        seed(base / "memlife.db")
        summary = run_local(RunConfig(dry_run=False, now=CUTOFF, store=f"sqlite:///{base / 'memlife.db'}",
                                      receipts=f"file://{base / 'receipts'}"))  # fmt: skip
    finally:
        del os.environ["MEMLIFE_HOME"]
    assert summary.status == "success" and summary.lifecycle["deleted"] > 0
    return {"base": base, "run_id": summary.run_id, "receipt": Path(summary.receipt or "")}
