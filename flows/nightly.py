"""The nightly lifecycle flow: memlife.pipeline.run with each step a Prefect task. Wiring only."""

from __future__ import annotations

from typing import Any

from memlife.prefect_env import configure

configure()

from prefect import flow, get_run_logger, task  # noqa: E402
from prefect.cache_policies import NO_CACHE  # noqa: E402

from flows import events, limits, shard  # noqa: E402
from memlife import pipeline  # noqa: E402
from memlife.run_types import RunConfig  # noqa: E402


def as_task(name: str, fn: pipeline.F) -> pipeline.F:
    # a Task is called as ``fn`` is (same parameters, same result), but its type is Task[P, R]
    return task(name=name, cache_policy=NO_CACHE, persist_result=False)(fn)  # type: ignore[return-value]


@flow(name="memlife-nightly", persist_result=False, validate_parameters=True,
      timeout_seconds=limits.FLOW_TIMEOUT_SECONDS)  # fmt: skip
def nightly(config: RunConfig = RunConfig()) -> dict[str, Any]:  # noqa: B008 - frozen: safe as a default
    summary = pipeline.run(config, as_task, fan_out=shard.fan_out, limit_model=limits.limited,
                           logger=get_run_logger(), on_failure=events.on_failure)  # fmt: skip
    events.publish(summary)
    return summary.as_json()
