"""Child outcomes and sealing keys a killed run left behind, removed.

A night's child batches stage replacement texts in sealed outcome files, and seal them
under a key of the attempt's own (memlife/outcomes.py). The attempt that finishes or fails
removes both; one killed outright (SIGKILL, a lost machine) leaves them, and its rerun is a
new attempt in another folder. An attempt's leftovers may go when it is certainly dead:

- its parent process is gone from this host (the marker the parent writes names it);
- the remover holds the store's lease and the attempt is an apply or retry run of that
  store: the lease makes the holder the store's one writer, so no such attempt still runs.

An apply run sweeps when it starts; an erasure before it compacts, since an erased text
may be staged in one. A dry run takes no lease: its attempts go once their process is gone.
On remote state (S3 and DynamoDB) an apply run removes the earlier attempts of its own run
id, the rerun of a killed night.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memlife import lease
from memlife.run_types import RunContext
from memlife.settings import settings

log = logging.getLogger(__name__)
MARKER = "attempt.json"
_WRITERS = ("apply", "retry")  # the modes that take the store's lease (run ids name them)


def mark_attempt(ctx: RunContext, store: str) -> None:
    """Beside a local attempt's report: which store, which process, which mode (no content)."""
    ctx.report_dir.mkdir(parents=True, exist_ok=True)
    body = {"store": store, "owner": lease.OWNER, "mode": ctx.mode}
    (ctx.report_dir / MARKER).write_text(json.dumps(body))


def _mode_of(run_id: str) -> str:
    parts = run_id.split("-")
    return parts[1] if len(parts) > 2 else ""


def _attempts(home: Path) -> Iterator[tuple[str, str]]:
    """(run id, attempt) of every attempt with outcomes or a sealing key under ``home``."""
    seen: set[tuple[str, str]] = set()
    for outcomes in (home / "reports").glob("*/*/outcomes"):
        seen.add((outcomes.parent.parent.name, outcomes.parent.name))
    keys = home / "run-keys"
    if keys.is_dir():
        for path in keys.iterdir():
            run_id, dot, attempt = path.name.partition(".")
            if dot and attempt:
                seen.add((run_id, attempt))
    yield from sorted(seen)


def _marker(folder: Path) -> dict[str, Any]:
    try:
        got = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return {}
    return got if isinstance(got, dict) else {}


def _dead(run_id: str, marker: dict[str, Any], store: str, holds_lease: bool,
          current: str | None) -> bool:  # fmt: skip
    owner = marker.get("owner")
    if owner == lease.OWNER:
        return False  # this process's own attempt, live (an erasure inside a run's process)
    if isinstance(owner, str) and lease.dead_here(owner):
        return True
    if not holds_lease or _mode_of(run_id) not in _WRITERS:
        return False
    if marker:
        return bool(marker.get("store") == store)
    return (
        run_id == current
    )  # no marker (written before there was one): the run key names the store


def sweep_local(store: str, *, holds_lease: bool, ours: tuple[str, str] | None = None) -> int:
    """Remove the outcomes and sealing keys of dead attempts under $MEMLIFE_HOME; returns
    how many attempts were swept. ``ours``: the caller's own attempt, never touched."""
    home = settings().home
    swept = 0
    for run_id, attempt in _attempts(home):
        if (run_id, attempt) == ours:
            continue
        folder = home / "reports" / run_id / attempt
        current = ours[0] if ours else None
        if not _dead(run_id, _marker(folder), store, holds_lease, current):
            continue
        shutil.rmtree(folder / "outcomes", ignore_errors=True)
        (home / "run-keys" / f"{run_id}.{attempt}").unlink(missing_ok=True)
        swept += 1
    if swept:
        log.info("removed the child outcomes of %d attempt(s) a killed run left", swept)
    return swept


def sweep_remote(remote: Any, ctx: RunContext) -> int:
    """Remove, on S3 and DynamoDB, the outcomes and keys of the run id's other attempts
    (the caller holds the store's lease); returns how many attempts were swept."""
    from memlife.state.dynamodb import key
    from memlife.state.reports import report_prefix

    ours = f"attempt={ctx.config.attempt}"
    prefix = report_prefix(remote, ctx.run_id, ctx.cutoff, ctx.config.attempt).rsplit("/", 1)[0]
    bucket = remote.settings.parquet_bucket
    attempts: set[str] = set()
    for page in remote.s3.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=f"{prefix}/attempt="
    ):
        for obj in page.get("Contents", []):
            attempt, _, rest = obj["Key"][len(prefix) + 1 :].partition("/")
            if attempt != ours and rest.startswith("outcomes/"):
                remote.s3.delete_object(Bucket=bucket, Key=obj["Key"])
                attempts.add(attempt.removeprefix("attempt="))
    for attempt in attempts:
        name = f"{ctx.run_id}.{attempt}"
        remote.ddb.delete_item(TableName=remote.table, Key=key("outkey", name))
    return len(attempts)


def sweep_for_run(ctx: RunContext, remote: Any, holds_lease: bool) -> None:
    """A run's start: its local marker, then the dead attempts' leftovers (never fails it)."""
    from memlife.stores import store_identity

    try:
        if remote is not None:
            if holds_lease:
                sweep_remote(remote, ctx)
            return
        identity = store_identity(ctx.store_url)
        mark_attempt(ctx, identity)
        attempt = ctx.config.attempt or ""
        sweep_local(identity, holds_lease=holds_lease, ours=(ctx.run_id, attempt))
    except Exception:  # a leftover stays for the next run; this one goes on
        log.warning("leftover child outcomes not removed", exc_info=True)


def sweep_for_erase(store: object) -> None:
    """An erasure, under the store's lease: a dead attempt's outcomes may stage the erased
    text. On one machine only (remote attempts go at their run id's next attempt)."""
    from memlife.state import uses_remote_state
    from memlife.stores import store_identity

    try:
        if uses_remote_state(store) is None:
            sweep_local(store_identity(getattr(store, "url", None)), holds_lease=True)
    except Exception:
        log.warning("leftover child outcomes not removed", exc_info=True)
