"""Fan-out helpers for the orchestration layer (flows/): pure functions, no Prefect here.

- ``config_params`` / ``config_from_params``: a run's config as JSON-able child parameters,
  with the cutoff fixed, so a child (Dask task, child flow run) derives the very same run
  id and run key as its parent (invariant 4: reruns and children resume, never fork).
- ``process_isolated``: one shard batch in its own process (own store connection, journal,
  executor and report part) for workers that cannot share the parent's live objects.
- ``failed_outcome``: a batch whose task raised becomes failed-shard entries, so one
  shard failing never fails the run (its receipt says ``partial_failure`` and names it).
- ``is_throttling``: which exceptions deserve an orchestration-level retry with backoff.
- ``run_event``: the content-free event for a run outcome (counts, failed shard names).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from memlife.consolidate.base import Consolidator
from memlife.pipeline import (
    BatchOutcome,
    RunConfig,
    RunContext,
    RunSummary,
    Shard,
    parse_now,
    remote_state,
)
from memlife.pipeline import process_isolated as process_isolated  # flows/shard.py runs it
from memlife.state import state_url

EVENT_PARTIAL = "memlife.run.partial_failure"
EVENT_FAILURE = "memlife.run.failure"
EVENT_BLOCKED = "memlife.run.blocked"  # the regression gate held the commit back

ConsolidatorWrap = Callable[[Consolidator | None], Consolidator | None]


# -- configs and shards as parameters ----------------------------------------------------------
def config_params(config: RunConfig, ctx: RunContext | None = None) -> dict[str, Any]:
    """JSON-able RunConfig; ``now`` pinned to the parent's cutoff when ``ctx`` is given."""
    out = dataclasses.asdict(config)
    out["namespaces"] = list(config.namespaces)
    out["actors"] = list(config.actors)
    now = ctx.cutoff if ctx is not None else config.now
    out["now"] = now.isoformat() if now is not None else None
    if ctx is not None:  # children write their report parts into the parent's attempt
        out["attempt"] = ctx.config.attempt
    out["state"] = config.state or state_url()  # children on other machines use the same state
    return out


def config_from_params(params: dict[str, Any]) -> RunConfig:
    fields = {f.name for f in dataclasses.fields(RunConfig)}
    unknown = set(params) - fields
    if unknown:
        raise ValueError(f"unknown run config field(s): {sorted(unknown)}")
    p = dict(params)
    p["namespaces"] = tuple(p.get("namespaces") or ())
    p["actors"] = tuple(p.get("actors") or ())
    p["now"] = parse_now(p.get("now"))
    return RunConfig(**p)


def shard_params(shards: Sequence[Shard]) -> list[dict[str, str]]:
    return [{"actor_id": s.actor_id, "namespace": s.namespace} for s in shards]


def shards_from_params(items: Sequence[dict[str, str]]) -> list[Shard]:
    return [Shard(i["actor_id"], i["namespace"]) for i in items]


def child_outcome(ctx: RunContext, part: str, prefect_result: Callable[[], Any]) -> BatchOutcome:
    """A finished child batch's outcome: from the run state on S3 when there is one (workers
    share no disk), else the child's persisted Prefect result."""
    remote = remote_state(ctx.store_url)
    if remote is None:
        return prefect_result()
    from memlife.state.reports import get_outcome

    return get_outcome(remote, ctx.run_id, ctx.cutoff, ctx.config.attempt, part)


def failed_outcome(shards: Sequence[Shard], error: BaseException | str) -> BatchOutcome:
    """Every shard of a batch that failed as a whole: recorded by name and error type only."""
    code = error if isinstance(error, str) else getattr(error, "code", None) or type(error).__name__
    return BatchOutcome(failed_shards=[{"shard": str(s), "code": str(code)} for s in shards])


_THROTTLE_CODES = {
    "ThrottledException",
    "ThrottlingException",
    "Throttling",
    "TooManyRequestsException",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "SlowDown",
    "RateLimitError",
    "rate_limit_error",
    "overloaded_error",
    "429",
    "529",
}


def is_throttling(exc: BaseException | None) -> bool:
    """True for rate limiting / overload (worth a retry with backoff), False otherwise."""
    seen = 0
    while exc is not None and seen < 5:
        names = {type(exc).__name__, str(getattr(exc, "code", "") or "")}
        status = getattr(exc, "status_code", None)
        if status is not None:
            names.add(str(status))
        response = getattr(exc, "response", None)
        if isinstance(response, dict):  # botocore ClientError
            names.add(str(response.get("Error", {}).get("Code", "")))
        if names & _THROTTLE_CODES:
            return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def calls_model(consolidator: Consolidator | None) -> bool:
    """Whether the consolidator calls a model (and so counts against the model-call limit)."""
    if consolidator is None:
        return False
    from memlife.consolidate.extractive import ExtractiveConsolidator

    return not isinstance(consolidator, ExtractiveConsolidator)


# -- events -------------------------------------------------------------------------------------
def _resource(run_id: str, mode: str) -> dict[str, str]:
    return {
        "prefect.resource.id": f"memlife.run.{run_id}",
        "prefect.resource.name": f"memlife {mode} {run_id}",
        "memlife.mode": mode,
    }


def run_event(summary: RunSummary) -> tuple[str, dict[str, str], dict[str, Any]] | None:
    """(event, resource, payload) for a run that did not fully succeed; None on success.

    Content-free: run id, status, policy version, counts and failed shard names/codes.
    """
    if summary.status == "success":
        return None
    event = {"failure": EVENT_FAILURE, "blocked": EVENT_BLOCKED}.get(summary.status, EVENT_PARTIAL)
    payload = {
        "run_id": summary.run_id,
        "status": summary.status,
        "mode": summary.mode,
        "policy_version": summary.policy_version,
        "cutoff": summary.cutoff,
        "counts": dict(summary.lifecycle),
        "records": summary.records,
        "shards": summary.shards,
        "failed_shards": [s["shard"] for s in summary.failed_shards],
        "failed_shard_codes": {s["shard"]: s.get("code") for s in summary.failed_shards},
        "receipt": summary.receipt,
    }
    if summary.gate is not None:  # ids, gate names and figures only
        from memlife.pipeline import gate_line

        g = summary.gate
        payload["gate"] = {
            "status": g.get("status"),
            "reasons": g.get("reasons", []),
            "high_impact_failed": g.get("high_impact_failed", []),
            "failed_cases": g.get("failed_cases", []),
            "gates": {
                n: {k: v.get(k) for k in ("value", "threshold", "before", "result")}
                for n, v in g.get("gates", {}).items()
            },
            "deletions_blocked": g.get("deletions_blocked"),
            "supersedes_blocked": g.get("supersedes_blocked"),
        }
        payload["summary"] = gate_line(summary.as_json())
    return event, _resource(summary.run_id, summary.mode), payload


def failure_event(
    ctx: RunContext, error: BaseException, receipt: str | None
) -> tuple[str, dict[str, str], dict[str, Any]]:
    """The run could not finish: error type only, never its message (it may carry data)."""
    payload = {
        "run_id": ctx.run_id,
        "status": "failure",
        "mode": ctx.mode,
        "policy_version": ctx.policy.version,
        "cutoff": ctx.cutoff.isoformat(),
        "error": type(error).__name__,
        "receipt": receipt,
    }
    return EVENT_FAILURE, _resource(ctx.run_id, ctx.mode), payload
