"""Groups the model failed for a retryable reason while it answered the batch's others.

A retryable failure (MODEL_UNAVAILABLE: a timeout, a 5xx, a proxy's page) is the
service's, not the group's, so the group is sent again the next night. A group that
alone fails every night (a request that always times out, a proxy that blocks it) was
then sent, and paid for, night after night for good. At the end of a batch, the groups
the service failed are judged: where it answered another call of the run, each failure
is the group's own and counts as a refused answer does (backoff, then review after
MAX_REJECTIONS, memlife/apply/rejections.py); where it answered nothing, one minimal
request (the consolidator's ``probe``: no memory content, one token) asks whether it
answers at all: a group alone in its run is judged too, and an outage blames none.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from memlife.apply.memo import REFUSED, remember
from memlife.apply.rejections import reject
from memlife.apply.tally import Tally

if TYPE_CHECKING:
    from memlife.apply.executor import Executor
    from memlife.consolidate.base import Group


def judge_unavailable(ex: Executor, tally: Tally, shards: Collection[tuple[str, str]]) -> None:
    """Count the batch's failed groups against them if the service answered a call of
    this batch (the consolidator counts its answers over the run), or a probe. Only this
    batch's ``shards``: another batch in its thread judges its own (its retry may answer
    them, audit 47m)."""
    failed = _take(ex, shards)
    since = ex.answers_seen
    if failed and not ex.dry_run and _answers(ex) <= since and not _probe_answered(ex, tally):
        failed = []  # nothing answered this batch, nor the probe: an outage
    ex.answers_seen = _answers(ex)
    if ex.dry_run:
        return
    for group, gkey, memo_key in failed:
        v = Tally()  # journaled: counted once over a throttled batch's attempts (carry.py)
        v.counts["consolidation_unavailable_alone"] += 1
        retry_at = reject(ex, group, gkey, "MODEL_UNAVAILABLE", v)
        tally.verdict(group.key, v)
        remember(ex, memo_key, group, REFUSED, retry_at)


def forget_attempt(ex: Executor, shards: Collection[tuple[str, str]]) -> None:
    """A batch starting again (a task retried by Prefect, a throttled batch retried): the
    failures its earlier attempt left for its shards are that attempt's; this attempt
    judges its own (else a group it then merges is also counted refused, or one failing
    twice is counted twice in one night: audit 47f)."""
    _take(ex, shards)


def _take(ex: Executor, shards: Collection[tuple[str, str]]) -> list[tuple[Group, str, str | None]]:
    """The failures left for these shards, taken off the executor's list (batches share it
    across threads: under its lock)."""
    mine = set(shards)
    with ex.unavailable_lock:
        taken = [u for u in ex.unavailable if (u[0].actor_id, u[0].namespace) in mine]
        ex.unavailable = [u for u in ex.unavailable
                          if (u[0].actor_id, u[0].namespace) not in mine]  # fmt: skip
    return taken


def _answers(ex: Executor) -> int:
    return int(getattr(ex.consolidator, "answered", 0))  # the run's answers so far


def _probe_answered(ex: Executor, tally: Tally) -> bool:
    probe = getattr(ex.consolidator, "probe", None)
    if probe is None:
        return False
    found = probe()
    if not getattr(found, "sent", True):
        return False  # never sent: no request to count
    tally.counts["model_probes"] += 1
    tally.model_calls += 1
    tally.input_tokens += found.input_tokens
    tally.output_tokens += found.output_tokens
    return bool(found.answered)
