"""A sealed nightly run to tamper with: a seeded store applied once, receipts on disk."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from memlife.journal import open_journal
from memlife.pipeline import RunConfig, run_local
from memlife.review import verify_run
from memlife.stores.sqlite import SqliteStore
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


def copied_run(pristine: dict, dest: Path) -> dict:
    """A copy of ``pristine`` (sealed_nightly_run's) under ``dest`` to tamper with: its
    root, the run id, the run receipt's path and its folder."""
    shutil.copytree(pristine["base"], dest, ignore=shutil.ignore_patterns("reports"))
    receipt = dest / pristine["receipt"].relative_to(pristine["base"])
    return {"root": dest, "run_id": pristine["run_id"], "receipt": receipt,
            "folder": receipt.parent}  # fmt: skip


def verify_problems(ev: dict, evidence_only: bool) -> list[dict[str, Any]]:
    """What ``verify_run`` finds in ``ev`` (copied_run's), from the evidence alone or
    against the store and its journal as well."""
    store = SqliteStore(ev["root"] / "memlife.db")
    try:
        v = verify_run(ev["sink"], None if evidence_only else store,
                       None if evidence_only else open_journal(store), ev["run_id"],
                       evidence_only=evidence_only)  # fmt: skip
    finally:
        store.close()
    return list(v.problems)
