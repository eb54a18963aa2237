"""Fan-out helpers for the orchestration layer (flows/): pure functions, no Prefect here.

- ``config_params`` / ``config_from_params``: a run's config as JSON-able child parameters,
  with the cutoff fixed, so a child (Dask task, child flow run) derives the very same run
  id and run key as its parent (invariant 4: reruns and children resume, never fork).
- ``process_isolated``: one shard batch in its own process (own store connection, journal,
  executor and report part) for workers that cannot share the parent's live objects.
- ``failed_batch`` (a batch task that failed, with what its throttled attempts recorded),
  ``failed_outcome`` and ``is_throttling`` (memlife/throttling.py, re-exported): a batch
  whose task raised becomes failed-shard entries; which exceptions deserve a retry.

The Prefect event shapes for a run's outcome are in flows/events.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from memlife.apply.carry import key_of, take
from memlife.consolidate.base import Consolidator
from memlife.pipeline import process_isolated as process_isolated  # flows/shard.py runs it
from memlife.run_start import remote_state
from memlife.run_types import BatchOutcome, RunConfig, RunContext, Shard
from memlife.state import state_url
from memlife.throttling import failed_outcome as failed_outcome  # flows/shard.py
from memlife.throttling import is_throttling as is_throttling  # flows/limits.py

ConsolidatorWrap = Callable[[Consolidator | None], Consolidator | None]


# -- configs and shards as parameters ----------------------------------------------------------
def config_params(config: RunConfig, ctx: RunContext | None = None) -> dict[str, Any]:
    """JSON-able RunConfig; ``now`` pinned to the parent's cutoff when ``ctx`` is given."""
    out = config.model_dump(mode="json")
    now = ctx.cutoff if ctx is not None else config.now
    out["now"] = now.isoformat() if now is not None else None
    if ctx is not None:  # children write their report parts into the parent's attempt
        out["attempt"] = ctx.config.attempt
    out["state"] = config.state or state_url()  # children on other machines use the same state
    return out


def config_from_params(params: dict[str, Any]) -> RunConfig:
    """The child's RunConfig (pydantic validates it: an unknown field is an error)."""
    return RunConfig.model_validate(params)


def shard_params(shards: Sequence[Shard]) -> list[dict[str, str]]:
    return [{"actor_id": s.actor_id, "namespace": s.namespace} for s in shards]


def shards_from_params(items: Sequence[dict[str, str]]) -> list[Shard]:
    return [Shard(i["actor_id"], i["namespace"]) for i in items]


def child_outcome(ctx: RunContext, part: str) -> BatchOutcome:
    """A finished child batch's outcome: from the run state on S3 when there is one (workers
    share no disk), else beside the run's report (memlife/outcomes.py: never a Prefect
    result, which would keep replacement texts where no erasure reaches)."""
    remote = remote_state(ctx.store_url)
    if remote is None:
        from memlife.outcomes import get_local_outcome

        return get_local_outcome(ctx, part)
    from memlife.state.reports import get_outcome

    return get_outcome(remote, ctx, part)


def failed_batch(
    ctx: RunContext, shards: Sequence[Shard], error: BaseException | str
) -> BatchOutcome:
    """A batch task that failed as a whole (throttled past its retries, crashed): its
    failed-shard entries, with what its throttled attempts recorded in this process (their
    model spend and journaled verdicts: memlife/apply/carry.py). A Prefect task's error is
    content-free (foreign_errors), so the tally is found by the batch, not on the error."""
    return failed_outcome(shards, error, take(key_of(ctx, shards)))


def calls_model(consolidator: Consolidator | None) -> bool:
    """Whether the consolidator calls a model (and so counts against the model-call limit)."""
    if consolidator is None:
        return False
    from memlife.consolidate.extractive import ExtractiveConsolidator

    return not isinstance(consolidator, ExtractiveConsolidator)
