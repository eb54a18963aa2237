"""Step 10: counts, operations.parquet, the run receipt and the report page; and the run's
one-line and markdown renderings (CLI, Prefect artifact, event payload).
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC
from pathlib import Path
from typing import Any

from memlife.apply import Tally
from memlife.apply.counts import journal_counts, lifecycle_from_journal
from memlife.audit import ReceiptWriteError
from memlife.evidence import seal, sealed
from memlife.evidence_gate import KeptGate
from memlife.journal import Journal
from memlife.metrics import publish_counts
from memlife.model import utcnow
from memlife.plan import Action
from memlife.report import ReportWriter
from memlife.rerun_counts import carried_over
from memlife.run_receipts import (
    completed_counts,
    completed_outcome,
    completed_plan,
    completed_receipt,
    completed_status,
    published_counts,
    put_run_receipt,
)
from memlife.run_start import remote_state, scope
from memlife.run_types import BatchOutcome, RunContext, RunSummary, Shard

log = logging.getLogger("memlife.pipeline")


def finish_run(
    ctx: RunContext,
    outcomes: Sequence[BatchOutcome],
    report: ReportWriter,
    t0: float,
    *,
    tallies: Sequence[Tally] = (),
    journal: Journal | None = None,
    gate: dict[str, Any] | None = None,
    shards_total: int | None = None,
    kept_gate: KeptGate | None = None,
) -> RunSummary:
    """Step 10: counts, operations.parquet and the run receipt (create-only). ``kept_gate``:
    the verdict kept before the commit (memlife/evidence_gate.py), the night's gate."""
    own_gate = gate
    if kept_gate is not None:  # a rerun reports the gate that approved the night's commit
        gate = kept_gate.gate
    remote = remote_state(ctx.store_url)
    merged: list[str] = []
    if remote is not None:  # child batches on other machines left their parts on S3
        from memlife.state.reports import download_parts

        merged = download_parts(
            remote, ctx.run_id, ctx.cutoff, ctx.config.attempt, report.folder / "parts"
        )
    report.merge_parts(report.folder / "parts")  # batches planned in other processes or flows
    # a batch that failed as a whole may have reported some shards first: the receipt counts
    # none of them, so neither does the report (its Parquet, the report page)
    report.drop_shards({(s["actor_id"], s["namespace"]) for o in outcomes for s in o.failed_shards})
    report.close()
    journal_ops = (
        journal.by_run(ctx.run_id) if journal is not None and not ctx.config.dry_run else []
    )
    # a rerun: what the killed attempt did is counted once (read before the report goes)
    carried = carried_over(journal_ops, report.parquet_path)
    report_paths = (str(report.jsonl_path), str(report.parquet_path))
    if remote is not None:
        from memlife.state.reports import upload_report

        report_paths = upload_report(
            remote,
            ctx.run_id,
            ctx.cutoff,
            ctx.config.attempt,
            report.jsonl_path,
            report.parquet_path,
            merged,
        )
    counts: Counter[str] = Counter()
    tally = Tally()
    for o in outcomes:
        counts.update(o.counts)
        tally.merge(o.tally)
    for t in tallies:
        tally.merge(t)
    if not ctx.config.dry_run:  # housekeeping, under the run's lease
        # still held? A night paused past its TTL and resumed here would compact the shared
        # ledger and seal, as ABANDONED, the live night that took its lease over (audit 51a)
        from memlife.lease import check_held
        from memlife.stores import store_identity

        check_held(store_identity(ctx.store_url))
        try:
            if folded := _compact_ledger(remote, ctx.cutoff):
                tally.counts["ledger_parts_compacted"] += folded
        except Exception:  # never fails the run: the parts stay as they are until tomorrow
            log.warning("access ledger compaction failed", exc_info=True)
            tally.counts["ledger_compaction_failed"] += 1
    if journal is not None and not ctx.config.dry_run:  # under the run's lease
        from memlife.run_abandoned import seal_abandoned

        if abandoned := seal_abandoned(ctx.sink, journal, store_url=ctx.store_url,
                                       run_id=ctx.run_id, cutoff=ctx.cutoff):  # fmt: skip
            tally.counts["abandoned_runs_sealed"] += len(abandoned)
    failed_shards = [s for o in outcomes for s in o.failed_shards]
    failed_shards += [Shard(s["actor_id"], s["namespace"]).failed(s["code"])
                      for s in tally.stopped_shards]  # fmt: skip
    records = carried.adjust(counts, sum(o.records for o in outcomes))
    # left for a human: a record whose every finding a reviewer answered for the content it
    # holds is still planned `review` (nothing changes it) but waits on nobody: retained
    answered = tally.counts.get("review_answered", 0)
    reviewed = counts.get("review", 0) - answered
    # a deletion only proposed (deletion not enforced there) or withheld by the gate: it stays
    # or a merge the gate withheld or blocked, or one not made (kept apart, refused, off),
    # or a change a shard the store stopped never reached (audit 51vii), or a delete an
    # earlier run's operation still owes (the retry queue's, audit 52e2): its records stay
    kept = sum(tally.counts.get(k, 0) for k in ("proposed_deletions", "gate_withheld_deletions",
                                                "gate_kept_records", "unmerged_kept_records",
                                                "shard_stopped_records",
                                                "delete_queued_records"))  # fmt: skip
    lifecycle = {
        "processed": records, "retained": counts.get("retain", 0) + answered + kept,
        "consolidated": tally.counts.get("consolidated", 0),
        "superseded": tally.counts.get("superseded", 0),
        "deleted": tally.counts.get("deleted", 0) + tally.counts.get("already_absent", 0),
        "quarantined": tally.counts.get("quarantined", 0), "reviewed": reviewed,
        "held": counts.get("hold", 0), "failed": tally.counts.get("failed", 0),
    }  # fmt: skip
    if ctx.config.dry_run:  # nothing changes: what is not held, for review or failed stays
        others = sum(v for k, v in lifecycle.items() if k not in ("processed", "retained"))
        lifecycle["retained"] = max(0, records - others)
    receipt_failures = tally.counts.get("receipt_failed", 0)
    jc: dict[str, int] = {}
    if journal is not None and not ctx.config.dry_run:
        # This run's changes over all its attempts come from the journal (a rerun after a
        # crash reports what the killed attempt did too); the tally only adds the retry
        # queue's work on earlier runs' operations.
        jc = journal_counts(journal_ops)
        lifecycle.update(lifecycle_from_journal(jc))
        receipt_failures = jc.get("unreceipted", 0) + sum(
            1 for f in tally.failures
            if f.get("code") == "RECEIPT_WRITE_FAILED" and f.get("run_id") != ctx.run_id
        )  # fmt: skip
    # a rerun of a completed run commits nothing (commit_run): it reports the figures of the
    # receipt it names, and adds nothing to the night's metrics (audit 47q)
    rerun = bool(tally.counts.get("rerun_of_completed_run"))
    # a dry run at a cutoff already dry-run plans anew (a key set since plans otherwise, 47r),
    # but the receipt and page there (create-only) are the first's: it named them beside its
    # own figures, and published the run's counts twice (audit 53o). It names neither now.
    if again := ctx.config.dry_run and completed_status(ctx.sink, ctx.prefix) is not None:
        tally.counts["dry_run_receipt_taken"] += 1
    night_blocked = False
    if rerun:
        lifecycle.update(completed_counts(ctx.sink, ctx.prefix))
        # and its plan: re-planned, the store the run left (its merged originals) read as
        # other actions (audit 49vii)
        planned, found = completed_plan(ctx.sink, ctx.prefix)
        if planned:
            counts = Counter(planned)
        records = found if found is not None else records
        # and its gate: this attempt's looked at the store the night left, perhaps under a
        # set edited since, and judged nothing it commits: a blocked night so rerun printed
        # success and a passing gate, its records still quarantined (audit 51iii)
        kept_status, gate = completed_outcome(ctx.sink, ctx.prefix)
        own_gate, night_blocked = None, kept_status == "blocked"
    queue_failed = sum(1 for f in tally.failures
                       if f.get("run_id") not in (None, ctx.run_id) and f.get("code") != "RECEIPT_WRITE_FAILED")  # fmt: skip
    status = "success"
    # the model refused the run's credentials or model name (401/403/404): no group was
    # judged, none is to blame, and nothing was consolidated; an operator must act
    misconfigured = tally.counts.get("consolidation_model_misconfigured", 0)
    if misconfigured and not ctx.config.dry_run:
        tally.failures.append({"action": "consolidate", "code": "MODEL_MISCONFIGURED",
                               "retryable": True, "detail": f"{misconfigured} groups"})  # fmt: skip
    if failed_shards or lifecycle["failed"] or receipt_failures or queue_failed or misconfigured:
        status = "partial_failure"
    blocked = night_blocked or any(g is not None and g.get("blocked") for g in (gate, own_gate))
    if blocked and not ctx.config.dry_run:
        status = "blocked"  # the gate held the commit back: not a success, whatever else went on
    retries = [at for f in tally.failures if (at := f.get("next_retry_at"))]
    # one set for the summary and the receipt: a flow run returned no scope_unmatched count
    # (the CLI adds its own), so its counts differed from its receipt's (audit 52d)
    other_counts = {**{k: v for k, v in tally.counts.items() if k not in lifecycle},
                    **{f"scope_unmatched:{o}={v}": 1 for o, v in ctx.scope_unmatched}}  # fmt: skip
    summary = RunSummary(
        run_id=ctx.run_id,
        policy_version=ctx.policy.version,
        cutoff=ctx.cutoff.isoformat(),
        mode=ctx.mode,
        status=status,
        counts={a.value: counts.get(a.value, 0) for a in Action},
        lifecycle=lifecycle,
        records=records,
        shards=sum(o.shards for o in outcomes),
        report=report_paths[0],
        report_parquet=report_paths[1],
        manifest=ctx.manifest_location,
        receipt=None,
        seconds=time.perf_counter() - t0,
        failed_shards=failed_shards,
        model={
            "calls": tally.model_calls,
            # answers a dry run was given to the same requests (consolidate/answers.py)
            "answers_reused": tally.counts.get("model_answers_reused", 0),
            "input_tokens": tally.input_tokens,
            "output_tokens": tally.output_tokens,
            "rejections": dict(tally.rejections),
            **(
                {
                    "estimated_calls": tally.counts.get("estimated_model_calls", 0),
                    "estimated_input_tokens": tally.counts.get("estimated_input_tokens", 0),
                }
                if ctx.config.dry_run
                else {}
            ),
        },
        gate=gate,
        other=dict(other_counts),
    )
    receipt = {
        "run_id": ctx.run_id, "mode": ctx.mode, "status": status,
        "policy_version": ctx.policy.version, "cutoff": ctx.cutoff.isoformat(),
        "scope": scope(ctx.config), "started_at": ctx.started_at.isoformat(),
        "finished_at": utcnow().isoformat(),
        "pagination_complete": not failed_shards,
        "shards": {"total": shards_total if shards_total is not None else summary.shards,
                   "completed": summary.shards, "failed": failed_shards},
        "records_found": records, "counts": lifecycle, "planned": summary.counts,
        "other_counts": other_counts,
        "ids_not_deleted": tally.ids_not_deleted, "failures": tally.failures,
        "next_retry_at": min(retries) if retries else None, "model": summary.model,
        "gate": gate, "receipt_failures": receipt_failures,
        "lease_taken_over": ctx.lease_taken_over, "journal_counts": jc,
        "retry_queue_failed": queue_failed, "previous_run": ctx.previous_run,
        # this attempt's own verdict on the store a killed attempt already changed
        **({"gate_rerun": kept_gate.rerun} if kept_gate and kept_gate.rerun is not None else {}),
    }  # fmt: skip
    rkey: str | None = None
    published = {} if rerun else published_counts(ctx.sink, ctx.prefix)  # before ours is
    try:
        rkey = completed_receipt(ctx.sink, ctx.prefix, journal_ops)  # a completed run's rerun
        if rkey is None:
            # manifest first (start_run), then this attempt's Parquet, the receipt last, sealed
            part = journal is not None and not ctx.config.dry_run
            evidence = seal(ctx.sink, ctx.prefix, journal_ops,
                            (ctx.run_id, ctx.cutoff, ctx.mode) if part else None,
                            secret=journal.run_secret() if journal is not None else b"")  # fmt: skip
            if part:  # names the kept gate verdict (null: none kept, e.g. a retry run)
                evidence.update(kept_gate.evidence() if kept_gate is not None
                                else {"gate_key": None, "gate_sha256": None})  # fmt: skip
            receipt["evidence"] = evidence
            rkey = write_run_receipt(ctx, sealed(receipt))
        summary.receipt = ctx.sink.location(rkey) if rkey and not again else None
    except ReceiptWriteError:
        summary.status = "partial_failure" if status == "success" else status
    drop_outcomes(ctx, remote)
    summary.report_html = None if again else write_report_page(ctx, summary, rkey)
    if not (rerun or again):
        publish_counts(lifecycle, namespace=ctx.config.metrics_namespace, mode=ctx.mode,
                       policy_version=ctx.policy.version, timestamp=ctx.cutoff, already=published)  # fmt: skip
    return summary


def drop_outcomes(ctx: RunContext, remote: Any) -> None:
    """The child batches' outcomes, read: they hold replacement texts (memlife/outcomes.py)."""
    try:
        if remote is not None:
            from memlife.state.reports import delete_outcomes

            delete_outcomes(remote, ctx.run_id, ctx.cutoff, ctx.config.attempt)
        else:
            from memlife.outcomes import drop_local_outcomes

            drop_local_outcomes(ctx)
        from memlife.outcomes import drop_run_key

        drop_run_key(ctx)
    except Exception:  # never fails the run; the next one finds nothing to commit twice
        log.warning("child outcomes not removed", exc_info=True)


def _compact_ledger(remote: Any, cutoff: Any) -> int:
    """Fold the access ledger's parts of the days before the cutoff's: on S3, or the local
    one under $MEMLIFE_HOME (a long-lived agent writes a part per burst of recalls)."""
    if remote is not None:
        from memlife.state.ledger import compact_closed_days

        return compact_closed_days(remote, cutoff)
    from memlife.ledger import AccessLedger
    from memlife.settings import settings

    root = settings().home / "ledger"
    if not root.is_dir():
        return 0
    day = cutoff.astimezone(UTC).date().isoformat()
    return sum(AccessLedger(root).compact(before=day).values())


def write_report_page(
    ctx: RunContext, summary: RunSummary, receipt_key: str | None = None
) -> str | None:
    """The HTML report beside the run's receipt; a page that cannot be written fails nothing."""
    from memlife.report_html import write_run_report

    try:
        return write_run_report(ctx.sink, ctx.prefix, summary.as_json(), receipt_key)
    except Exception as exc:  # noqa: BLE001 - the page is a view of the evidence, not evidence
        log.warning("run report page not written: %s", type(exc).__name__)
        return None


def write_failure_receipt(
    ctx: RunContext, error: BaseException, journal: Journal | None = None
) -> str | None:
    """The run could not finish: say so, with the error type only (never a message with data).

    With the run's journal it is sealed as any receipt: what the run changed before it
    failed (its operations Parquet, counts from the journal), so ``verify`` can check it
    even when no rerun at this cutoff ever follows (a scheduled run's next attempt)."""
    receipt: dict[str, Any] = {
        "run_id": ctx.run_id, "mode": ctx.mode, "status": "failure",
        "policy_version": ctx.policy.version, "cutoff": ctx.cutoff.isoformat(),
        "scope": scope(ctx.config), "started_at": ctx.started_at.isoformat(),
        "finished_at": utcnow().isoformat(), "pagination_complete": False,
        "error": type(error).__name__, "previous_run": ctx.previous_run,
    }  # fmt: skip
    try:
        if journal is not None and not ctx.config.dry_run:
            ops = journal.by_run(ctx.run_id)
            jc = journal_counts(ops)
            receipt.update(counts=lifecycle_from_journal(jc), journal_counts=jc)
            receipt["evidence"] = seal(
                ctx.sink,
                ctx.prefix,
                ops,
                (ctx.run_id, ctx.cutoff, ctx.mode),
                secret=journal.run_secret(),
            )
            receipt = sealed(receipt)
        key = write_run_receipt(ctx, receipt)
        return ctx.sink.location(key) if key else None
    except ReceiptWriteError:
        return None
    except Exception as exc:  # noqa: BLE001 - the journal unreadable too: the plain receipt
        from memlife.settings import settings

        # named, as this module's other warnings are: the run's own error line says the rest
        # (a damaged run secret printed two tracebacks before it; MEMLIFE_DEBUG shows them)
        log.warning("failure receipt not sealed: %s", type(exc).__name__,
                    exc_info=settings().debug)  # fmt: skip
        try:
            key = write_run_receipt(ctx, {k: v for k, v in receipt.items() if k != "evidence"})
            return ctx.sink.location(key) if key else None
        except ReceiptWriteError:
            return None


def write_run_receipt(ctx: RunContext, receipt: dict[str, Any]) -> str | None:
    """Create-only: receipt.json, or receipt.N.json when a rerun completes an earlier failure
    (``run_receipts.put_run_receipt``)."""
    return put_run_receipt(ctx.sink, ctx.prefix, receipt)


_ONE = re.compile(
    r"\b(?<![.,])1 (deletion|consolidation|supersede|record|call|case|group|answer)s\b"
)


def singular(line: str) -> str:
    """``line`` with a count of one singular: "1 consolidations" is "1 consolidation"."""
    return _ONE.sub(r"1 \1", line)


def gate_line(result: dict[str, Any]) -> str | None:
    """One line for the operator: the gate's verdict, the case or gate, figures, quarantined."""
    line = _gate_line(result)
    return None if line is None else singular(line)


def _gate_line(result: dict[str, Any]) -> str | None:
    g = result.get("gate")
    if not g:
        return None
    if not g.get("configured", True):
        # what went ahead unevaluated, counted: obligations, consolidations elsewhere
        dels, groups = g.get("ungated_deletions", 0), g.get("ungated_groups", 0)
        dry = result.get("mode") == "dry_run"
        went = "an apply run would let go ahead ungated: " if dry else "went ahead ungated: "
        if not g.get("required"):
            return (f"gate: not configured (not required by the policy); {went}{dels} deletions "
                    f"and {groups} consolidations")  # fmt: skip
        went += (
            f"{dels} deletions (obligations) and {groups} consolidations (namespaces not enforced)"
        )
        if dry:
            return ("gate: not configured (GATE_NOT_CONFIGURED): an apply run would withhold "
                    f"{g['withheld_deletions']} deletions and {g['withheld_groups']} consolidations "
                    f"in enforced namespaces (every judgement); see `memlife eval init`; {went}")  # fmt: skip
        return (f"gate: not configured (GATE_NOT_CONFIGURED): {g['withheld_deletions']} deletions and "
                f"{g['withheld_groups']} consolidations withheld in enforced namespaces; {went}; "
                "write a set with `memlife eval init` and pass --eval-cases")  # fmt: skip
    figures = []
    for name, v in g.get("gates", {}).items():
        if v.get("result", "pass") != "pass":
            op = "<" if name in ("must_retain_recall", "aggregate_score") else ">"
            figures.append(f"{name} {v['value']:.3f} {op} {v['threshold']:.3f} "
                           f"(before {v['before']:.3f}, {v['result']})")  # fmt: skip
    if unchecked := g.get("answers_unchecked"):
        figures.append(
            f"answer checks not run for {len(unchecked)} case(s) (the model did not answer)"
        )
    dry = result.get("mode") == "dry_run"
    if g.get("blocked"):
        cases = g.get("high_impact_failed") or g.get("regressed_cases") or g.get("failed_cases")
        # a dry run quarantines nothing: it says what the apply run would (audit 49iii)
        quarantined = ((g.get("held_back") or {}).get("quarantined", 0) if dry
                       else result.get("lifecycle", {}).get("quarantined", 0))  # fmt: skip
        held = [p for p, k in (("deletions", "deletions_blocked"), ("supersedes", "supersedes_blocked"))
                if g.get(k)]  # fmt: skip
        if g.get("deletions_blocked") and g.get("blocking_actors"):  # the others' went ahead
            held[0] = f"deletions of {len(g['blocking_actors'])} actor(s)"
        verb = "would block" if dry else "BLOCKED"
        return (f"gate: {verb} ({', '.join(g['reasons'])}) case {', '.join(cases or ['-'])}; "
                f"{'; '.join(figures) or 'gates within thresholds'}; held: {', '.join(held) or 'nothing'};"
                f" {quarantined} records {'would be ' if dry else ''}quarantined")  # fmt: skip
    agg = g.get("gates", {}).get("aggregate_score", {}).get("value")
    head = f"gate: {g.get('status', 'pass')} ({g.get('cases', 0)} cases"
    head += f", aggregate_score {agg:.3f})" if agg is not None else ")"
    unseen = g.get("uncovered") or {}
    unchecked = g.get("uncovered_cases") or []
    # why they wait: a case that reads no record, or one that could not read a record (a
    # damaged row: "no case checks nothing" sent the operator looking for a typo, 53iii)
    unread = g.get("unreadable_cases") or []
    why = [f"{len(unchecked)} case(s) check nothing in this store (no record in their actor "
           "or namespace, or a must-retrieve id absent)"] if unchecked else []  # fmt: skip
    if unread:
        why.append(f"{len(unread)} cases could not read their records (CORRUPT_RECORD)")
    if unseen.get("deletions") or unseen.get("groups"):
        figures.append(f"GATE_UNCOVERED: {len(unseen.get('deletions', []))} deletions and "
                       f"{len(unseen.get('groups', []))} consolidations wait: "
                       f"{'; '.join(why) or 'no case checks them'}")  # fmt: skip
    elif why:
        figures.append("GATE_UNCOVERED: " + "; ".join(why))
    return head + (": " + "; ".join(figures) if figures else "")


def gate_verdict(gate: dict[str, Any] | None) -> str:
    """``blocked`` / ``warn`` / ``passed`` / ``not configured`` / ``not run``: in a word
    (the report page's words, decided in one place)."""
    from memlife.report_html import gate_text

    return gate_text(gate)[0]


def as_link(location: str) -> str:
    """A location from a sink as a URL (a local path becomes file://)."""
    return location if "://" in location else Path(location).resolve().as_uri()


def markdown_summary(summary: RunSummary) -> str:
    from memlife.would_change import would_change

    lines = [f"# memlife {summary.mode} `{summary.run_id}`", "",
             f"status **{summary.status}**, policy `{summary.policy_version}`, cutoff {summary.cutoff}, "
             f"regression gate **{gate_verdict(summary.gate)}**", ""]  # fmt: skip
    if summary.dry_run:  # nothing changed: say what an apply run would change
        lines += ["| an apply run would | records |", "|---|---:|"]
        lines += [f"| {k} | {v:,} |" for k, v in would_change(summary.as_json())]
        lines += ["", "| planned action | records |", "|---|---:|"]
        lines += [f"| {k} | {v:,} |" for k, v in summary.counts.items()]
    else:
        lines += ["| count | records |", "|---|---:|"]
        lines += [f"| {k} | {v:,} |" for k, v in summary.lifecycle.items()]
    if summary.failed_shards:
        lines += ["", "Failed shards: " + ", ".join(s["shard"] for s in summary.failed_shards)]
    line = gate_line(summary.as_json())
    if line:
        lines += ["", line]
    if summary.receipt:
        lines += ["", f"Receipt: `{summary.receipt}`"]
    if summary.report_html:
        lines += ["", f"[Report page]({as_link(summary.report_html)})"]
    return "\n".join(lines)
