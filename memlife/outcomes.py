"""A child batch's outcome, handed to the parent run outside the orchestrator's storage.

A ``BatchOutcome`` carries the batch's staged consolidations, replacement texts included,
until the parent commits them. Persisted as the child flow's Prefect result it stayed in
Prefect's result storage for good, where no erasure reaches. So a child puts it beside its
report part (one machine: ``reports/<run_id>/<attempt>/outcomes/<part>.pickle``; with
MEMLIFE_STATE, on S3: memlife/state/reports.py), returns nothing to Prefect, and the
parent run removes them once its receipt is written (``drop_outcomes``).
"""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

from memlife.run_types import BatchOutcome, RunContext


def _path(ctx: RunContext, part: str) -> Path:
    return ctx.report_dir / "outcomes" / f"{part}.pickle"


def put_local_outcome(ctx: RunContext, part: str, outcome: BatchOutcome) -> None:
    path = _path(ctx, part)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL))
    tmp.replace(path)


def get_local_outcome(ctx: RunContext, part: str) -> BatchOutcome:
    """The outcome a child of this run put here (FileNotFoundError: it put none)."""
    got: BatchOutcome = pickle.loads(_path(ctx, part).read_bytes())  # noqa: S301 - our child's
    return got


def drop_local_outcomes(ctx: RunContext) -> None:
    shutil.rmtree(ctx.report_dir / "outcomes", ignore_errors=True)
