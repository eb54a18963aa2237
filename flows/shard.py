"""Shard fan-out: the ``memlife-shard`` flow (child runs) and the three ways to fan out.

Wiring only; the work is memlife.run_planning.process_batch / memlife.fanout.process_isolated.

- ``fan_out_tasks``: shard batches as tasks on a thread pool sharing the run's store,
  report and executor.
- ``fan_out_deployments``: each batch a child flow run of the ``memlife-shard/shard``
  deployment on a work pool (``run_deployment``), so batches spread over many workers.
  With MEMLIFE_STATE (dynamodb://...) the child puts its report part and BatchOutcome on
  S3 and the parent reads them there: workers share no disk. Without it the child puts its
  outcome beside the run's report (one machine). Never a Prefect result: it holds the
  staged replacement texts (memlife/outcomes.py).

In every mode a batch that raises (after its throttling retries) becomes failed-shard
entries: the other batches go on and the run receipt says ``partial_failure``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from memlife.prefect_env import configure

configure()

from prefect import flow, task  # noqa: E402
from prefect.cache_policies import NO_CACHE  # noqa: E402
from prefect.client.orchestration import get_client  # noqa: E402
from prefect.client.schemas.objects import FlowRun  # noqa: E402
from prefect.context import FlowRunContext  # noqa: E402
from prefect.deployments import run_deployment  # noqa: E402

from flows import limits  # noqa: E402
from memlife import fanout, run_planning  # noqa: E402
from memlife.foreign_errors import content_free  # noqa: E402
from memlife.run_types import BatchOutcome, RunConfig, RunContext, Shard, collect  # noqa: E402

_task: Any = dict(cache_policy=NO_CACHE, persist_result=False)

# a library's error message may quote memory content: Prefect keeps it (foreign_errors)
process_batch = task(name="process-shards", **_task, **limits.RETRYING)(
    content_free(run_planning.process_batch)
)
isolated_batch = task(name="process-shards-isolated", **_task, **limits.RETRYING)(
    content_free(fanout.process_isolated)
)

SHARD_DEPLOYMENT = RunConfig.model_fields["shard_deployment"].default


@flow(
    name="memlife-shard",
    persist_result=False,  # the outcome holds replacement texts: memlife/outcomes.py hands it over
    validate_parameters=True,
    timeout_seconds=limits.FLOW_TIMEOUT_SECONDS,
)
def shard(config: dict[str, Any], shards: list[dict[str, str]], part: str = "0") -> None:
    """Process the given shards of a parent run (same run id: ``config.now`` is its cutoff);
    the parent reads the outcome where the child put it (``fanout.child_outcome``)."""
    run = isolated_batch.with_options(persist_result=False)
    run(fanout.config_from_params(config), fanout.shards_from_params(shards), part, limits.limited)


def _settle(
    ctx: RunContext, futures: list[Any], groups: Sequence[Sequence[Shard]]
) -> list[BatchOutcome]:
    """Wait for every batch; a failed one becomes failed-shard entries instead of an error
    (keeping what its throttled attempts counted: model spend, refusals)."""
    outcomes: list[BatchOutcome] = []
    for fut, group in zip(futures, groups, strict=True):
        result = fut.result(raise_on_failure=False)
        if isinstance(result, BatchOutcome):
            collect(outcomes, result)
        elif isinstance(result, BaseException):
            collect(outcomes, fanout.failed_batch(ctx, group, result))
        else:
            collect(outcomes, fanout.failed_batch(ctx, group, f"TASK_{fut.state.type.value}"))
    return outcomes


def fan_out(
    ctx: RunContext, db: Any, groups: Sequence[Sequence[Shard]], report: Any, executor: Any
) -> list[BatchOutcome]:
    """The nightly flow's planning of its batches, as ``ctx.config.fan_out`` says."""
    if ctx.config.fan_out == "deployments":
        return fan_out_deployments(ctx, groups, ctx.config.shard_deployment)
    return fan_out_tasks(ctx, db, groups, report, executor, max_workers=ctx.config.max_workers)


def fan_out_tasks(
    ctx: RunContext,
    db: Any,
    groups: Sequence[Sequence[Shard]],
    report: Any,
    executor: Any,
    *,
    max_workers: int = 4,
) -> list[BatchOutcome]:
    if not groups:
        return []
    with limits.task_runner(max_workers) as tr:
        futures = [
            tr.submit(
                process_batch,
                {
                    "ctx": ctx,
                    "store": db,
                    "shards": list(g),
                    "report": report,
                    "executor": executor,
                },
            )
            for g in groups
        ]
        return _settle(ctx, futures, groups)


def fan_out_deployments(
    ctx: RunContext,
    groups: Sequence[Sequence[Shard]],
    deployment: str = SHARD_DEPLOYMENT,
    poll_seconds: float = 2.0,
) -> list[BatchOutcome]:
    """One child flow run per batch on the shard deployment's work pool; wait for all."""
    params = fanout.config_params(ctx.config, ctx)
    parent = FlowRunContext.get()
    parent_id = str(parent.flow_run.id) if parent and parent.flow_run else ctx.run_id
    runs = [
        _started(
            run_deployment(
                deployment,
                timeout=0,
                as_subflow=True,
                parameters={"config": params, "shards": fanout.shard_params(g), "part": str(i)},
                flow_run_name=f"{ctx.run_id}-part-{i}",
                # per attempt: a child's outcome is sealed by its attempt's key and dropped
                # when that attempt fails, so a retried parent (a new attempt) starts its own
                # children (they resume the journal); another run never takes one of these
                idempotency_key=f"{parent_id}:{ctx.run_id}:{ctx.config.attempt}:{i}",
            )
        )
        for i, g in enumerate(groups)
    ]
    outcomes: list[BatchOutcome | None] = [None] * len(runs)
    done: list[BatchOutcome] = []  # in the order they finish
    with get_client(sync_client=True) as client:
        while any(o is None for o in outcomes):
            for i, fr in enumerate(runs):
                if outcomes[i] is not None:
                    continue
                state = client.read_flow_run(fr.id).state
                if state is None or not state.is_final():
                    continue
                if state.is_completed():
                    try:
                        outcome = fanout.child_outcome(ctx, str(i))
                    except Exception as exc:  # no outcome where the child puts it
                        outcome = fanout.failed_outcome(groups[i], exc)
                else:
                    outcome = fanout.failed_outcome(groups[i], f"CHILD_{state.type.value}")
                outcomes[i] = outcome
                collect(done, outcome)
            if any(o is None for o in outcomes):
                time.sleep(poll_seconds)
    return done


def check_deployment(name: str) -> None:
    """The shard deployment is on the server; else the run is refused before it starts."""
    from prefect.exceptions import ObjectNotFound

    from memlife.errors import InputError

    with get_client(sync_client=True) as client:
        try:
            client.read_deployment_by_name(name)
        except ObjectNotFound:
            raise InputError(f"shard deployment {name!r} not found on the Prefect server") from None


def _started(run: object) -> FlowRun:
    """run_deployment's flow run: called from sync code it returns one, not a coroutine."""
    if not isinstance(run, FlowRun):
        raise TypeError(f"run_deployment returned {type(run).__name__}, not a FlowRun")
    return run
