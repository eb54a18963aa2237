"""Orchestration limits and runners: settings, retries, the model-call concurrency limit.

Wiring only. Settings come from the environment (read through ``memlife.settings``, never
at import of this module) so a work pool / job variables can set them without a code change:

MEMLIFE_FLOW_TIMEOUT_SECONDS   flow timeout (default 6 h)
MEMLIFE_TASK_RETRIES           retries of a shard batch on throttling (default 3)
MEMLIFE_RETRY_BACKOFF_SECONDS  exponential backoff factor: 10 -> 10, 20, 40 s (default 10)
MEMLIFE_RETRY_JITTER           retry jitter factor (default 0.5)
MEMLIFE_MODEL_CALLS_LIMIT      name of the Prefect global concurrency limit for model calls
                               (default ``memlife-model-calls``; create it with
                               ``prefect gcl create memlife-model-calls --limit 4``)
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from memlife.prefect_env import configure

configure()  # quiet and offline before Prefect loads, whichever flows module comes first

from prefect.concurrency.sync import concurrency  # noqa: E402
from prefect.task_runners import ThreadPoolTaskRunner  # noqa: E402

from memlife import fanout, throttling  # noqa: E402
from memlife.consolidate.answers import AnswerBook  # noqa: E402
from memlife.consolidate.base import ConsolidationResult, Consolidator, Group  # noqa: E402
from memlife.settings import settings  # noqa: E402


def __getattr__(name: str) -> Any:
    """The limits as module attributes, read from ``memlife.settings`` when first used
    rather than when this module is imported. Prefect's decorators in nightly.py and
    shard.py read them when those modules load: in a deployment that is the flow run's
    own process, so a work pool's job variables apply to each run."""
    s = settings()
    values: dict[str, Any] = {
        "FLOW_TIMEOUT_SECONDS": s.flow_timeout_seconds,
        "TASK_RETRIES": s.task_retries,
        "RETRY_BACKOFF_SECONDS": s.retry_backoff_seconds,
        "RETRY_JITTER": s.retry_jitter,
        "MODEL_CALLS_LIMIT": s.model_calls_limit,
    }
    if name == "RETRYING":
        return retrying()
    if name in values:
        return values[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def retry_on_throttling(task: Any, task_run: Any, state: Any) -> bool:
    """Prefect ``retry_condition_fn``: retry a batch only when it was throttled."""
    try:
        exc = state.result(raise_on_failure=False)
    except Exception as err:  # the result itself could not be read
        exc = err
    return isinstance(exc, BaseException) and fanout.is_throttling(exc)


def retrying() -> dict[str, Any]:
    """Task options for work that may be throttled (model calls, store pages)."""
    s = settings()
    return dict(
        retries=s.task_retries,
        retry_delay_seconds=throttling.backoff_delays(s.task_retries, s.retry_backoff_seconds),
        retry_jitter_factor=s.retry_jitter,
        retry_condition_fn=retry_on_throttling,
    )


class LimitedConsolidator:
    """A consolidator whose every model call holds one slot of the global concurrency limit.

    All flow runs, workers and child runs share the limit on the Prefect server, so the
    account-wide model rate stays bounded however wide the fan-out is. A limit that does
    not exist on the server is not enforced (Prefect warns), so a laptop run still works.
    """

    def __init__(self, inner: Consolidator, limit: str | None = None):
        self.inner = inner
        self.name = inner.name
        self.limit = limit or settings().model_calls_limit

    def consolidate(self, group: Group, answers: AnswerBook | None = None) -> ConsolidationResult:
        """``answers``: the run's kept answers, handed through to a consolidator that keeps
        them (memlife/apply/answers.py finds ``keeps_answers`` on the wrapped one)."""
        with concurrency(self.limit, occupy=1, strict=False):
            if answers is None:
                return self.inner.consolidate(group)
            return self.inner.consolidate(group, answers=answers)  # type: ignore[call-arg]  # keeps_answers: it takes them

    def __getattr__(self, name: str) -> Any:  # model name, stats, ... of the wrapped one
        found = getattr(self.inner, name)
        if name == "probe":  # the outage probe is a model call too (apply/unavailable.py)
            return functools.partial(self._in_a_slot, found)
        return found

    def _in_a_slot(self, call: Callable[[], Any]) -> Any:
        with concurrency(self.limit, occupy=1, strict=False):
            return call()


def limited(consolidator: Consolidator | None) -> Consolidator | None:
    """Wrap a model-calling consolidator; the extractive one (no model) is left alone."""
    if consolidator is None or not fanout.calls_model(consolidator):
        return consolidator
    return LimitedConsolidator(consolidator)


def task_runner(max_workers: int = 4) -> ThreadPoolTaskRunner[Any]:
    """The runner for shard batches within one run: a thread pool. Work across machines is
    the child-deployment fan-out (fan_out='deployments'); the Dask runner was removed."""
    return ThreadPoolTaskRunner(max_workers=max(1, max_workers))
