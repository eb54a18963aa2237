"""A child batch's outcome, handed to the parent run outside the orchestrator's storage.

A ``BatchOutcome`` carries the batch's staged consolidations, replacement texts included,
until the parent commits them. Persisted as the child flow's Prefect result it stayed in
Prefect's result storage for good, where no erasure reaches. So a child puts it beside its
report part (one machine: ``reports/<run_id>/<attempt>/outcomes/<part>.pickle``; with
MEMLIFE_STATE, on S3: memlife/state/reports.py), returns nothing to Prefect, and the
parent run removes them once its receipt is written (``drop_outcomes``); a parent killed
outright leaves them, and memlife/outcome_sweep.py removes them later.

Reading one is reading a file from a folder or bucket other processes write to, and an
outcome is a list of instructions (its deletions and staged replacements are carried out).
So the child seals it (``seal``: an HMAC-SHA256 under a key of the run's own, kept in the
state table with MEMLIFE_STATE, else under $MEMLIFE_HOME/run-keys with mode 0600) and the
parent opens it (``unseal``): write access to the reports bucket is not enough to plant
one. Unsealed, it loads with ``loads_outcome``: a pickle that names anything but the types
an outcome is made of (``OUTCOME_TYPES``) is refused before the name is looked up, as the
pickle documentation advises ("Restricting Globals"). A refused file runs nothing: the
batch counts as failed (OUTCOME_REFUSED) and the run goes on.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import os
import pickle
import secrets
import shutil
import time
from pathlib import Path
from typing import Any

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


# -- the run's sealing key -------------------------------------------------------------------
_MAC_BYTES = 32


def _key_path(run_id: str) -> Path:
    from memlife.settings import settings

    return settings().home / "run-keys" / run_id


def _local_key(run_id: str) -> bytes:
    """Created once (O_EXCL) by whichever process of the run comes first; 0600."""
    path = _key_path(run_id)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(_MAC_BYTES))
    for _ in range(50):  # another process created it a moment ago: its bytes follow
        got = path.read_bytes()
        if len(got) == _MAC_BYTES:
            return got
        time.sleep(0.02)
    raise OutcomeRefused(f"the run's outcome key {path} is not a key")


def _remote_key(state: Any, run_id: str) -> bytes:
    from botocore.exceptions import ClientError

    from memlife.state.dynamodb import is_conditional_failure, key

    k = key("outkey", run_id)
    try:  # create-only: the first process of the run sets it
        state.ddb.put_item(TableName=state.table, Item={**k, "key": {"B": secrets.token_bytes(32)}},
                           ConditionExpression="attribute_not_exists(pk)")  # fmt: skip
    except ClientError as exc:
        if not is_conditional_failure(exc):
            raise
    item = state.get(k)
    return bytes(item["key"]["B"]) if item else b""


def _key_name(ctx: RunContext) -> str:
    """One key per attempt: an attempt that ends drops its own, never another's (two dry
    runs of one scope and cutoff share a run id and take no lease)."""
    return f"{ctx.run_id}.{ctx.config.attempt or 'first'}"


def run_key(ctx: RunContext) -> bytes:
    from memlife.run_start import remote_state

    remote = remote_state(ctx.store_url)
    name = _key_name(ctx)
    return _remote_key(remote, name) if remote is not None else _local_key(name)


def drop_run_key(ctx: RunContext) -> None:
    from memlife.run_start import remote_state

    remote = remote_state(ctx.store_url)
    if remote is not None:
        from memlife.state.dynamodb import key

        remote.ddb.delete_item(TableName=remote.table, Key=key("outkey", _key_name(ctx)))
    else:
        _key_path(_key_name(ctx)).unlink(missing_ok=True)


def seal(ctx: RunContext, outcome: BatchOutcome) -> bytes:
    body = dumps_outcome(outcome)
    return hmac.new(run_key(ctx), body, hashlib.sha256).digest() + body


def unseal(ctx: RunContext, data: bytes, where: str) -> BatchOutcome:
    """The outcome a child of this run sealed; OutcomeRefused for anything else."""
    mac, body = data[:_MAC_BYTES], data[_MAC_BYTES:]
    want = hmac.new(run_key(ctx), body, hashlib.sha256).digest()
    if not hmac.compare_digest(mac, want):
        raise OutcomeRefused(f"child outcome {where} is not sealed by this run")
    return loads_outcome(body, where)


# -- one machine: beside the run's report -----------------------------------------------------
def put_local_outcome(ctx: RunContext, part: str, outcome: BatchOutcome) -> None:
    path = _path(ctx, part)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(seal(ctx, outcome))
    tmp.replace(path)


def get_local_outcome(ctx: RunContext, part: str) -> BatchOutcome:
    """The outcome a child of this run put here (FileNotFoundError: it put none)."""
    path = _path(ctx, part)
    return unseal(ctx, path.read_bytes(), str(path))


def drop_local_outcomes(ctx: RunContext) -> None:
    shutil.rmtree(ctx.report_dir / "outcomes", ignore_errors=True)
