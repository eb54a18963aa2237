"""The nightly lifecycle flow: memlife.pipeline.run with each step a Prefect task. Wiring only."""

from __future__ import annotations

from typing import Any

from memlife.prefect_env import configure

configure()

from prefect import flow, get_run_logger, task  # noqa: E402
from prefect.cache_policies import NO_CACHE  # noqa: E402
from prefect.client.schemas.objects import State  # noqa: E402
from prefect.runtime import flow_run  # noqa: E402
from prefect.states import Completed  # noqa: E402

from flows import events, limits, shard  # noqa: E402
from memlife import pipeline  # noqa: E402
from memlife.foreign_errors import content_free  # noqa: E402
from memlife.run_types import RunConfig, operator_config  # noqa: E402

# a run that did not fully succeed ends Completed under its own name (the receipt's status),
# not plain Completed: visible in the UI and to automations; not Failed, which would make
# Prefect retry a run whose work is done (a rerun changes nothing: same run, receipt stands)
STATE_NAMES = {"partial_failure": "PartialFailure", "blocked": "Blocked"}


def as_task(name: str, fn: pipeline.F) -> pipeline.F:
    # a Task is called as ``fn`` is (same parameters, same result), but its type is Task[P, R]
    # a library's error message may quote memory content: Prefect keeps it (foreign_errors)
    return task(name=name, cache_policy=NO_CACHE, persist_result=False)(content_free(fn))  # type: ignore[return-value]  # a Task, called as fn


@flow(name="memlife-nightly", persist_result=False, validate_parameters=True,
      timeout_seconds=limits.FLOW_TIMEOUT_SECONDS,
      on_failure=[events.on_invalid_parameters])  # fmt: skip
def nightly(config: RunConfig = RunConfig()) -> dict[str, Any] | State:  # noqa: B008 - frozen: safe as a default
    # the cutoff pinned to this flow run's schedule (a retry is the same run), a far-future
    # apply cutoff refused: as the CLI does
    try:
        config = operator_config(config, flow_run.scheduled_start_time)
        if config.fan_out == "deployments":  # a typo'd name: refused before lease and manifest
            shard.check_deployment(config.shard_deployment)
    except BaseException as exc:
        events.on_refused(config, exc)
        raise
    summary = content_free(pipeline.run)(config, as_task, fan_out=shard.fan_out, limit_model=limits.limited,
                           logger=get_run_logger(), on_failure=events.on_failure,
                           on_refused=events.on_refused)  # fmt: skip
    events.publish(summary)
    result = summary.as_json()
    if summary.status in STATE_NAMES:
        return Completed(data=result, name=STATE_NAMES[summary.status],
                         message=f"memlife run {summary.run_id}: {summary.status}")  # fmt: skip
    return result
