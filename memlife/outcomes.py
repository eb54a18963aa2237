"""A child batch's outcome, handed to the parent run outside the orchestrator's storage.

A ``BatchOutcome`` carries the batch's staged consolidations, replacement texts included,
until the parent commits them. Persisted as the child flow's Prefect result it stayed in
Prefect's result storage for good, where no erasure reaches. So a child puts it beside its
report part (one machine: ``reports/<run_id>/<attempt>/outcomes/<part>.pickle``; with
MEMLIFE_STATE, on S3: memlife/state/reports.py), returns nothing to Prefect, and the
parent run removes them once its receipt is written (``drop_outcomes``).

Reading one is reading a file from a folder or bucket other processes write to, and a
pickle calls whatever it names while it loads. So the parent loads it with
``loads_outcome``: a pickle that names anything but the types an outcome is made of
(``OUTCOME_TYPES``) is refused before the name is looked up, as the pickle documentation
advises ("Restricting Globals"). A file that writes ``os.system`` or a memlife class with
side effects (a store that opens a file) runs nothing: the batch counts as failed
(OUTCOME_REFUSED) and the run goes on.
"""

from __future__ import annotations

import io
import pickle
import shutil
from pathlib import Path

from memlife.errors import OutcomeRefused
from memlife.run_types import BatchOutcome, RunContext

# Every type a BatchOutcome holds (tests/unit/test_outcomes.py walks a gated apply's
# outcome and fails when a new one appears): data classes, enums and stdlib values only.
OUTCOME_TYPES = frozenset(
    {
        ("collections", "Counter"),
        ("datetime", "datetime"),
        ("datetime", "timedelta"),
        ("datetime", "timezone"),
        ("memlife.apply.deletions", "DeleteItem"),
        ("memlife.apply.groups", "StagedGroup"),
        ("memlife.apply.groups", "StagedRef"),
        ("memlife.apply.tally", "Tally"),
        ("memlife.journal.base", "OpKind"),
        ("memlife.journal.base", "OpState"),
        ("memlife.journal.base", "Operation"),
        ("memlife.model", "MemoryRecord"),
        ("memlife.model", "MemoryType"),
        ("memlife.model", "Provenance"),
        ("memlife.model", "RetentionClass"),
        ("memlife.model", "Source"),
        ("memlife.model", "Status"),
        ("memlife.plan", "Action"),
        ("memlife.plan", "Decision"),
        ("memlife.plan", "Reason"),
        ("memlife.review_queue.candidates", "ReviewCandidates"),
        ("memlife.run_types", "BatchOutcome"),
    }
)


class _OutcomeUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> type:
        if (module, name) not in OUTCOME_TYPES:
            raise OutcomeRefused(f"names {module}.{name}, which no outcome holds")
        found: type = super().find_class(module, name)
        return found


def dumps_outcome(outcome: BatchOutcome) -> bytes:
    return pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)


def loads_outcome(body: bytes, where: str) -> BatchOutcome:
    """The outcome a child wrote at ``where``; OutcomeRefused (naming ``where``, never a
    value) for anything else."""
    try:
        got = _OutcomeUnpickler(io.BytesIO(body)).load()
    except OutcomeRefused as exc:
        raise OutcomeRefused(f"child outcome {where} {exc}") from None
    except Exception as exc:  # truncated, not a pickle, a class that refuses its state
        raise OutcomeRefused(
            f"child outcome {where} is unreadable ({type(exc).__name__})"
        ) from None
    if not isinstance(got, BatchOutcome):
        raise OutcomeRefused(f"child outcome {where} holds a {type(got).__name__}, not an outcome")
    return got


def _path(ctx: RunContext, part: str) -> Path:
    return ctx.report_dir / "outcomes" / f"{part}.pickle"


def put_local_outcome(ctx: RunContext, part: str, outcome: BatchOutcome) -> None:
    path = _path(ctx, part)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(dumps_outcome(outcome))
    tmp.replace(path)


def get_local_outcome(ctx: RunContext, part: str) -> BatchOutcome:
    """The outcome a child of this run put here (FileNotFoundError: it put none)."""
    path = _path(ctx, part)
    return loads_outcome(path.read_bytes(), str(path))


def drop_local_outcomes(ctx: RunContext) -> None:
    shutil.rmtree(ctx.report_dir / "outcomes", ignore_errors=True)
