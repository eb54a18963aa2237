"""The nightly run's one sequence: :func:`run` is the only place that orders the steps.

Order (DESIGN.md): lease -> start (manifest first) -> drain the retry queue -> list the
shards -> per shard batch: page, expire, score, group, plan, report, stage (nothing
written) -> regression gate on everything staged (before: the store as found; after: a
shadow view) -> commit what the gate allows (replacements, supersedes, deletions;
quarantine what it blocks) -> review queue -> receipts and counts. A shard is one actor +
namespace; shards are processed in batches so orchestration overhead stays small at 1M
records, and a shard is never split, so no operation mixes actors or namespaces.

Engines differ only in how a step runs: the Prefect flow (flows/nightly.py) passes a
``step`` wrapper that makes each step a task and a ``fan_out`` that spreads the batches
over task threads or child deployments; the local engine (:func:`run_local`, the CLI's
``--engine local``, tests, benchmarks) passes neither. The steps live in run_start,
run_planning, run_commit and run_finish; the types in run_types.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from functools import partial
from typing import Any, Protocol, TypeVar

from memlife import progress
from memlife.apply import Executor, Tally
from memlife.consolidate.base import Consolidator
from memlife.evalset import load_cases
from memlife.evidence_gate import keep_verdict
from memlife.faults import checkpoint
from memlife.journal import Journal, open_journal, open_memo_reader
from memlife.model import parse_time
from memlife.outcome_sweep import sweep_for_run
from memlife.report import ReportWriter
from memlife.run_commit import GateFn, commit_run, queue_reviews, run_gate, under_kept
from memlife.run_finish import drop_outcomes, finish_run, gate_verdict, write_failure_receipt
from memlife.run_finish import gate_line as gate_line  # re-exported: the CLI's one line
from memlife.run_finish import markdown_summary as markdown_summary  # re-exported
from memlife.run_planning import embeddings_for, open_report, process_batch
from memlife.run_receipts import run_receipts
from memlife.run_scope import check_namespaces, check_store_exists, unmatched_scope
from memlife.run_start import remote_state, start_run, take_lease, use_state
from memlife.run_types import (
    BatchOutcome,
    RunConfig,
    RunContext,
    RunSummary,
    Shard,
    check_name,
    collect,
)
from memlife.settings import settings
from memlife.stores import MemoryStore, open_store, resolve_store_url
from memlife.throttling import retried

__all__ = ["RunConfig", "RunContext", "RunSummary", "Shard", "BatchOutcome", "run", "run_local"]

log = logging.getLogger("memlife.pipeline")

F = TypeVar("F", bound=Callable[..., Any])


class Step(Protocol):
    """(step name, step function) -> the function the engine calls instead (Prefect: a task)."""

    def __call__(self, name: str, fn: F, /) -> F: ...


# (ctx, store, shard batches, report, executor) -> one outcome per batch, failures included
FanOut = Callable[
    [RunContext, MemoryStore, list[list[Shard]], ReportWriter, Executor | None],
    list[BatchOutcome],
]
ModelLimit = Callable[[Consolidator | None], Consolidator | None]
OnFailure = Callable[[RunContext, BaseException, str | None], None]


def identity(name: str, fn: F) -> F:
    """The local engine's step: the function itself."""
    return fn


def run(
    config: RunConfig,
    step: Step = identity,
    *,
    fan_out: FanOut | None = None,
    limit_model: ModelLimit | None = None,
    gate: GateFn | None = None,
    consolidator: Consolidator | None = None,
    logger: logging.Logger | logging.LoggerAdapter[Any] = log,
    on_failure: OnFailure | None = None,
    on_refused: Callable[[RunConfig, BaseException], None] | None = None,
) -> RunSummary:
    """One lifecycle run, in DESIGN.md's order, whatever the engine.

    ``fan_out`` plans the shard batches (default: in this process, or in processes for a
    large dry run); ``limit_model`` wraps the consolidator (Prefect: the global model-call
    limit); ``gate`` and ``consolidator`` replace the real ones (tests); ``on_failure``
    sees a run that could not finish after its failure receipt is written, ``on_refused``
    one refused before it started (no run id, no receipt: a bad store, scope or policy).
    """
    t0 = time.perf_counter()
    try:
        use_state(config)  # the run's state (a flow parameter) holds its lease: before it
        check_store_exists(resolve_store_url(config.store))  # a run never creates a store
        store = open_store(config.store)
    except BaseException as exc:
        if on_refused is not None:
            on_refused(config, exc)
        raise
    lease = None
    try:
        check_namespaces(store, config.namespaces)  # before anything is written
        if cases := config.eval_cases or settings().eval_cases:  # a set that cannot load
            load_cases(cases)  # stops the run before it starts (any engine), as the CLI's
        unmatched = unmatched_scope(store, config.namespaces, config.actors)
        for option, value in unmatched:  # a typo'd scope is no quiet night (any engine)
            logger.warning("%s %r matches no record in the store (scope_unmatched); nothing "
                           "of it is planned", option, value)  # fmt: skip
        lease = take_lease(config, store)  # one lifecycle writer per store; else LeaseHeld
        ctx = step("start-run", start_run)(config)
        ctx.scope_unmatched = unmatched
    except BaseException as exc:
        if lease is not None:
            lease.release()
        store.close()
        if on_refused is not None:
            on_refused(config, exc)
        raise
    logger.info("run %s: %s, policy %s, cutoff %s", ctx.run_id, ctx.mode, ctx.policy.version,
                ctx.cutoff.isoformat())  # fmt: skip
    if lease is not None:
        lease.bind(ctx.run_id)
        ctx.lease_taken_over = lease.taken_over
    sweep_for_run(ctx, remote_state(ctx.store_url), holds_lease=lease is not None)
    if not config.dry_run:  # under the lease: the run before this one on the store
        from memlife.run_chain import advance

        ctx.previous_run = advance(open_journal(store), ctx.run_id, ctx.sink)
    try:
        summary = _steps(ctx, store, step, t0, fan_out, limit_model, gate, consolidator, logger)
    except BaseException as exc:  # incl. a flow timeout: the receipt says the run failed
        journal = None if config.dry_run or config.retry_only else _journal_or_none(store)
        receipt = write_failure_receipt(ctx, exc, journal)
        # the child batches' staged replacement texts: a rerun is a new attempt that never
        # reads them, and an erasure before it would not find them
        drop_outcomes(ctx, remote_state(ctx.store_url))
        if on_failure is not None:
            on_failure(ctx, exc, receipt)
        raise
    finally:
        if lease is not None:
            lease.release()
        store.close()
    logger.info("run %s: %s; %s", summary.run_id, summary.status,
                ", ".join(f"{k} {v}" for k, v in summary.lifecycle.items()))  # fmt: skip
    return summary


def _steps(
    ctx: RunContext,
    store: MemoryStore,
    step: Step,
    t0: float,
    fan_out: FanOut | None,
    limit_model: ModelLimit | None,
    gate: GateFn | None,
    consolidator: Consolidator | None,
    logger: logging.Logger | logging.LoggerAdapter[Any],
) -> RunSummary:
    config = ctx.config
    executor, journal = None, None
    tallies: list[Tally] = []
    if not config.dry_run or config.consolidate:
        journal = open_journal(store) if not config.dry_run else None
        chosen = consolidator or make_consolidator(ctx)
        chosen = limit_model(chosen) if limit_model is not None else chosen
        executor = make_executor(ctx, store, journal, chosen)
    if journal is not None:  # a damaged run secret stops the run before its first change
        journal.run_secret()  # (the retry queue's), not after it (audit 51a)
    if executor is not None and not config.dry_run:
        tallies.append(step("retry-queue", resume_due)(executor))
    report = open_report(ctx)
    if config.retry_only:
        return step("finish-run", finish_run)(ctx, [], report, t0, tallies=tallies, journal=journal)
    progress.phase("listing shards")
    shards = step("list-shards", list_shards)(ctx, store)
    tallies.append(unmatched_enforcement(ctx, shards))
    groups = batches(shards, config.shards_per_batch)
    logger.info("%d shards (actor + namespace) in %d batches", len(shards), len(groups))
    progress.phase(f"planning {len(shards):,} shards", records_in_scope(store, config))
    if fan_out is not None:
        outcomes = fan_out(ctx, store, groups, report, executor)
    elif (
        consolidator is None  # an injected one (tests) or a wrapped one lives in this process
        and limit_model is None
        and (workers := planning_workers(config, len(shards))) > 1
    ):
        outcomes = plan_in_processes(ctx, shards, workers, lambda part: retried(
            partial(process_batch, ctx, store, part, report, executor), part))  # fmt: skip
    else:
        outcomes = []
        for b in groups:  # a throttled batch is retried, as a Prefect task is (throttling.py)
            collect(outcomes, retried(partial(process_batch, ctx, store, b, report, executor), b))
    logger.info("planned %d records", sum(o.records for o in outcomes))
    checkpoint("after_stage")  # staged: nothing written yet
    progress.phase("regression gate" if config.eval_cases else "finishing")
    if gate is not None:
        verdict = gate(ctx, store, [i for o in outcomes for i in o.deletions])
    else:
        verdict = step("regression-gate", run_gate)(ctx, store, outcomes)
    logger.info("regression gate: %s", gate_verdict(verdict))
    checkpoint("after_gate")  # verdict known: nothing committed yet
    kept = None
    if executor is not None:
        # the verdict that approves the commit, kept before it: a rerun after a kill past
        # the commit reports it (audit 50j) and commits under it and its own (audit 53gr)
        if journal is not None:
            kept = keep_verdict(ctx, verdict, journal.run_secret())
        governing = under_kept(store, outcomes, verdict, kept.gate if kept else None, ctx=ctx)
        tallies.append(step("commit", commit_run)(ctx, executor, outcomes, governing))
    tallies.append(step("queue-reviews", queue_reviews)(ctx, store, outcomes))
    return step("finish-run", finish_run)(ctx, outcomes, report, t0, tallies=tallies,
                                          journal=journal, gate=verdict, shards_total=len(shards),
                                          kept_gate=kept)  # fmt: skip


def _journal_or_none(store: MemoryStore) -> Journal | None:
    """The store's journal for a failure receipt's seal; None when it cannot be opened."""
    try:
        return open_journal(store)
    except Exception:  # noqa: BLE001 - a failure receipt without a seal beats none
        return None


def run_local(
    config: RunConfig, gate: GateFn | None = None, consolidator: Consolidator | None = None
) -> RunSummary:
    """The whole run in-process without Prefect (tests, benchmarks, --engine local)."""
    return run(config, gate=gate, consolidator=consolidator)


def resume_due(executor: Executor) -> Tally:
    """Drain the retry queue of operations that are due (earlier runs' included)."""
    tally = Tally()
    executor.resume_due(tally)
    return tally


def make_consolidator(ctx: RunContext) -> Consolidator | None:
    """Anthropic when ANTHROPIC_API_KEY is set, else the extractive one; None if disabled.

    A dry run uses the extractive one unless ``with_model`` (it estimates calls instead)."""
    if not ctx.config.consolidate:
        return None
    paid = not ctx.config.dry_run or ctx.config.with_model
    if paid and settings().anthropic_api_key:
        from memlife.consolidate.anthropic import AnthropicConsolidator

        return AnthropicConsolidator.from_env(policy=ctx.policy)
    from memlife.consolidate.extractive import ExtractiveConsolidator

    # standing in for the model an apply run would call (a dry run's estimate): it leaves
    # the complement-or-update judgement to that model
    stand_in = not paid and bool(settings().anthropic_api_key)
    return ExtractiveConsolidator(policy=ctx.policy, judge_additive=not stand_in)


def make_executor(
    ctx: RunContext, store: MemoryStore, journal: Journal | None = None,
    consolidator: Consolidator | None = None,
) -> Executor:  # fmt: skip
    dry = ctx.config.dry_run
    return Executor(
        run_id=ctx.run_id, run_key=ctx.run_key, policy=ctx.policy, cutoff=ctx.cutoff,
        store=store, sink=ctx.sink,
        # a dry run never journals: it must not even create the journal table
        journal=journal if journal is not None or dry else open_journal(store),
        consolidator=consolidator, dry_run=ctx.config.dry_run,
        # the run's one cache: the groups' analysis finds what subject inference just read
        embeddings=embeddings_for(ctx, store) if consolidator is not None else None,
        evaluated=bool(ctx.config.eval_cases),
        memo_reader=open_memo_reader(store) if dry and consolidator is not None else None,
        memo_as=applied_consolidator_id() if dry else None,
        eval_digest=eval_digest(ctx.config.eval_cases),
        # the run's receipts when this attempt began: its moves are a rerun's after those
        after_receipts=0 if dry else len(run_receipts(ctx.sink, ctx.prefix)),
    )  # fmt: skip


def eval_digest(location: str | None) -> str | None:
    """The evaluation set's digest (a gate block is memoised under it); None without one, or
    when it does not load (the gate step reports that)."""
    if not location:
        return None
    from memlife.evalset import EvalSetError, cases_digest, load_cases

    try:
        return cases_digest(load_cases(location))
    except (EvalSetError, OSError):
        return None


def applied_consolidator_id() -> str:
    """Who an apply run would consolidate with (make_consolidator), as the memo keys it."""
    if settings().anthropic_api_key:
        from memlife.consolidate import prompts
        from memlife.consolidate.anthropic import DEFAULT_MODEL, AnthropicConsolidator

        model = settings().model or DEFAULT_MODEL  # and its prompt, as memo_key adds it
        return f"{AnthropicConsolidator.name}:{model}:{prompts.PROMPT_VERSION}"
    from memlife.consolidate.extractive import ExtractiveConsolidator

    return f"{ExtractiveConsolidator.name}:"


def list_shards(ctx: RunContext, store: MemoryStore) -> list[Shard]:
    """Step 2: every actor/namespace in scope (namespace globs, actor ids)."""
    actors = set(ctx.config.actors)
    shards = []
    for actor in store.list_actors():
        if actors and actor not in actors:  # its namespaces are not listed
            continue
        shards += [Shard(actor, ns) for ns in store.list_namespaces(actor)
                   if ctx.config.covers(actor, ns)]  # fmt: skip
    return shards


def unmatched_enforcement(ctx: RunContext, shards: Sequence[Shard]) -> Tally:
    """An unscoped run names each ``enforce_deletion_in`` glob that matches no namespace of
    the store (``enforcement_glob_unmatched:<glob>`` in its counts, and a warning): a typo
    that is still a glob would otherwise enforce nothing, silently."""
    tally = Tally()
    if ctx.config.namespaces or ctx.config.actors:  # a scoped run sees part of the store
        return tally
    for glob in ctx.policy.unmatched_enforcement({s.namespace for s in shards}):
        log.warning("policy: enforce_deletion_in %r matches no namespace of the store", glob)
        tally.counts[f"enforcement_glob_unmatched:{glob}"] = 1
    return tally


def batches(shards: Sequence[Shard], size: int) -> list[list[Shard]]:
    return [list(shards[i : i + size]) for i in range(0, len(shards), size)]


def records_in_scope(store: MemoryStore, config: RunConfig) -> int | None:
    """Records an unscoped run will plan, when the store can count them cheaply (SQLite)."""
    count = getattr(store, "count", None)
    if count is None or config.namespaces or config.actors:
        return None
    return int(count())


def process_isolated(
    config: RunConfig,
    shards: Sequence[Shard],
    part: str,
    wrap: Callable[[Consolidator | None], Consolidator | None] | None = None,
) -> BatchOutcome:
    """A shard batch with its own store, journal, executor and report part.

    ``config.now`` must be the parent's cutoff (``config_params(config, ctx)``): the run
    id, run key and so every operation id then match the parent's. The decisions go to
    ``reports/<run_id>/<attempt>/parts/<part>/`` (the parent's report holds the in-process batches).
    """
    if config.now is None:
        raise ValueError("an isolated batch needs the parent's cutoff (config.now)")
    check_name(part, "part")  # joined onto the run's report folder: a name, never a path
    ctx = start_run(config)  # the manifest exists already: create-only, the first one stands
    store = open_store(config.store)
    try:
        journal = None if config.dry_run else open_journal(store)
        consolidator = make_consolidator(ctx)
        if wrap is not None:
            consolidator = wrap(consolidator)
        executor = make_executor(ctx, store, journal, consolidator)
        report = ReportWriter(ctx.report_dir / "parts" / part)
        try:
            outcome = process_batch(ctx, store, shards, report, executor)
            remote = remote_state(ctx.store_url)
            if remote is not None:  # the parent reads it from S3 (fanout.child_outcome)
                from memlife.state.reports import put_outcome

                put_outcome(remote, ctx, part, outcome)
            else:  # one machine: beside the report part, never in Prefect's result storage
                from memlife.outcomes import put_local_outcome

                put_local_outcome(ctx, part, outcome)
            return outcome
        finally:
            # the parent merges the part's JSONL: a Parquet copy here would cost ~50 MB of
            # this process's peak and its CPU for nothing
            report.close(parquet=False)
            remote = remote_state(ctx.store_url)
            if remote is not None:  # the parent may run on another machine: the part goes to S3
                from memlife.state.reports import upload_part

                upload_part(
                    remote, ctx.run_id, ctx.cutoff, ctx.config.attempt, part, report.jsonl_path
                )
                shutil.rmtree(ctx.report_dir, ignore_errors=True)
    finally:
        store.close()


# Planning parts a process: the last part still running while the other process has none
# left is the tail every run waits for (with 4: ~0.4 s of a 4 s apply at 100k)
PARTS_PER_PROCESS = 8


def planning_workers(config: RunConfig, shards: int) -> int:
    """Processes for planning, dry and apply runs alike: planning and staging only read
    (an apply child writes keyed, idempotent rows: inferred subjects, the consolidation
    memo); the parent alone commits, after the gate, through its journal."""
    if config.retry_only:
        return 1
    wanted = config.workers or min(4, os.cpu_count() or 1)
    # a spawned child costs ~2.5 s of imports and ~120 MB: by default only for 250+ shards
    # a process (about 10k demo records); an explicit ``workers`` for 50+
    per = 50 if config.workers else 250
    return max(1, min(wanted, shards // per))


def plan_in_processes(
    ctx: RunContext,
    shards: Sequence[Shard],
    workers: int,
    local: Callable[[list[Shard]], BatchOutcome] | None = None,
) -> list[BatchOutcome]:
    """Planning fanned out over processes, each with its own store connection and report
    part (merged by finish_run). Same run id and cutoff in every process. An apply run's
    children stage as the Prefect fan-out's do (process_isolated); what they staged comes
    back in their outcomes and the parent's gate and commit take it from there.

    With ``local`` the parent is one of the ``workers``: it plans parts itself from the far
    end of the list, taking back each one no child has started (a cancelled future), so no
    core idles while the parent waits and one process fewer holds memory."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    params = ctx.config.model_copy(update={"now": ctx.cutoff, "workers": 1})
    parts = batches(shards, max(1, -(-len(shards) // (workers * PARTS_PER_PROCESS))))
    # fork is cheap and safe in a dry run without consolidation: no model, thread pool or
    # lease heartbeat (an apply run's) exists before planning starts
    method = "fork" if ctx.config.dry_run and not ctx.config.consolidate else "spawn"
    children = workers - 1 if local is not None else workers
    outcomes: list[BatchOutcome] = []
    context = multiprocessing.get_context(method)
    pool = ProcessPoolExecutor(children, mp_context=context, initializer=_child_signals)
    try:
        futures = [
            pool.submit(isolated_retried, params, part, f"{i:05d}") for i, part in enumerate(parts)
        ]
        if local is not None:
            for part, future in zip(reversed(parts), reversed(futures), strict=True):
                if not future.cancel():
                    break  # a child has it, and every part before it
                outcome = local(part)  # process_batch advanced the bar shard by shard
                collect(outcomes, outcome)
        for future in as_completed([f for f in futures if not f.cancelled()]):
            outcome = future.result()
            progress.advance(outcome.records)
            collect(outcomes, outcome)
    except BaseException:
        # stopped (Ctrl-C, SIGTERM) or failed: `with pool` waited for the children to plan
        # every part left, calling the model for each (audit 52j). They commit nothing: end
        # them (a terminal's Ctrl-C is the parent's alone: a child it broke failed the pool
        # on a cancelled future). Pending parts are cancelled first, so the pool's manager
        # drops them before it sees its workers gone
        alive = list(pool._processes.values())  # no public way to end a pool's workers
        pool.shutdown(wait=False, cancel_futures=True)
        for child in alive:
            child.terminate()
        raise
    pool.shutdown()  # not again after the above: it would undo cancel_futures
    return outcomes


def _child_signals() -> None:
    """SIGINT ignored (Ctrl-C is the parent's), SIGTERM default: a forked child inherited
    cli.Stopped, and ``terminate`` only ended its part; it planned the next one (52r)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def isolated_retried(params: RunConfig, part: Sequence[Shard], name: str) -> BatchOutcome:
    """A child process's batch, retried while throttled (the parent's retries cannot reach
    inside it)."""
    return retried(partial(process_isolated, params, part, name), part)


def parse_now(value: str | None) -> datetime | None:
    return parse_time(value) if value else None
