"""What a run tells Prefect: the artifacts (counts, summary, report link) and, when it did
not fully succeed, a content-free event (run id, status, counts, failed shard names and
codes, gate figures: never a memory's content or an error's message)."""

from __future__ import annotations

from typing import Any

from memlife.prefect_env import configure

configure()

from prefect import get_run_logger  # noqa: E402
from prefect.artifacts import (  # noqa: E402
    create_link_artifact,
    create_markdown_artifact,
    create_table_artifact,
)
from prefect.events import emit_event  # noqa: E402
from prefect.exceptions import EventTooLarge  # noqa: E402

from memlife.run_finish import as_link, gate_line, markdown_summary  # noqa: E402
from memlife.run_types import RunConfig, RunContext, RunSummary, mode_of  # noqa: E402

EVENT_PARTIAL = "memlife.run.partial_failure"
EVENT_FAILURE = "memlife.run.failure"
EVENT_BLOCKED = "memlife.run.blocked"  # the regression gate held the commit back
# failed shards an event names; the receipt lists them all. Every name (~100 bytes with its
# code) went in: past ~15,000 (a night the store refused) the event outgrew Prefect's 1.5 MB,
# emit_event raised EventTooLarge after the receipt and the night's alert was lost (audit 52d)
MAX_LISTED_SHARDS = 100


def publish(summary: RunSummary) -> None:
    """The run's artifacts, then its event when it did not fully succeed."""
    if summary.report_html:
        create_link_artifact(
            key="memlife-report",
            link=as_link(summary.report_html),
            link_text=f"memlife {summary.mode} {summary.run_id} report",
            description="The run report page (counts, reasons, gate, trends).",
        )
    counts = {**summary.lifecycle, **summary.counts}
    create_table_artifact(
        key="memlife-counts",
        table=[{"count": k, "records": v} for k, v in counts.items()],
        description=f"memlife {summary.mode} {summary.run_id}: {summary.status}",
    )
    create_markdown_artifact(key="memlife-summary", markdown=markdown_summary(summary))
    _emit(run_event(summary))


def on_failure(ctx: RunContext, error: BaseException, receipt: str | None) -> None:
    """The run could not finish (its failure receipt is written): log and emit the event."""
    get_run_logger().error("run %s failed: %s", ctx.run_id, type(error).__name__)
    _emit(failure_event(ctx, error, receipt))


def on_refused(config: RunConfig, error: BaseException) -> None:
    """The run was refused before it started (a bad policy path, a missing store, a glob
    that can match nothing): no run id, no receipt, and still the failure event, so the
    automation watching memlife.run.* alerts (a Failed flow run alone alerted nobody)."""
    get_run_logger().error("run refused before it started: %s", type(error).__name__)
    _emit(refused_event(config, error))


def on_invalid_parameters(flow: Any, flow_run: Any, state: Any) -> None:
    """Prefect refused the flow run's parameters before its body ran (a mistyped key, a
    cutoff without a zone): ``on_refused`` never ran, so the refusal's event is sent here."""
    if str(getattr(state, "message", "") or "").startswith("Validation of flow parameters failed"):
        payload = {"run_id": None, "status": "failure", "stage": "start", "mode": None,
                   "error": "ParameterValidationError"}  # fmt: skip
        _emit((EVENT_FAILURE, _resource("refused", "unknown"), payload))


def refused_event(
    config: RunConfig, error: BaseException
) -> tuple[str, dict[str, str], dict[str, Any]]:
    """Error type and mode only, never the message (it may name a path or a value)."""
    mode = mode_of(config)
    payload = {"run_id": None, "status": "failure", "stage": "start", "mode": mode,
               "error": type(error).__name__}  # fmt: skip
    return EVENT_FAILURE, _resource("refused", mode), payload


def _emit(event: tuple[str, dict[str, str], dict[str, Any]] | None) -> None:
    if event is not None:
        name, resource, payload = event
        try:
            emit_event(event=name, resource=resource, payload=payload)
        except EventTooLarge:  # still too large (long names, a lowered limit): the alert
            # goes out without its lists rather than not at all, and the run is not failed
            # the gate line too: a blocked gate's names every failing case (audit 53iii)
            lists = ("failed_shards", "failed_shard_codes", "gate", "summary")
            kept = {k: v for k, v in payload.items() if k not in lists}
            emit_event(event=name, resource=resource, payload={**kept, "truncated": True})


def _resource(run_id: str, mode: str) -> dict[str, str]:
    return {
        "prefect.resource.id": f"memlife.run.{run_id}",
        "prefect.resource.name": f"memlife {mode} {run_id}",
        "memlife.mode": mode,
    }


def run_event(summary: RunSummary) -> tuple[str, dict[str, str], dict[str, Any]] | None:
    """(event, resource, payload) for a run that did not fully succeed; None on success.

    Content-free: run id, status, policy version, counts, the first MAX_LISTED_SHARDS failed
    shards' names and codes and how many failed.
    """
    if summary.status == "success":
        return None
    event = {"failure": EVENT_FAILURE, "blocked": EVENT_BLOCKED}.get(summary.status, EVENT_PARTIAL)
    listed = summary.failed_shards[:MAX_LISTED_SHARDS]
    payload = {
        "run_id": summary.run_id,
        "status": summary.status,
        "mode": summary.mode,
        "policy_version": summary.policy_version,
        "cutoff": summary.cutoff,
        "counts": dict(summary.lifecycle),
        "records": summary.records,
        "shards": summary.shards,
        "failed_shards": [s["shard"] for s in listed],
        "failed_shard_codes": {s["shard"]: s.get("code") for s in listed},
        "failed_shards_total": len(summary.failed_shards),  # the receipt lists them all
        "receipt": summary.receipt,
    }
    if summary.gate is not None:  # ids, gate names and figures only
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
