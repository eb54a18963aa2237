"""What a throttled attempt of a shard batch recorded, carried to the attempt that ends it.

A throttled batch is retried from the start (memlife/throttling.retried on the local
engine, the task's retries under Prefect) with a fresh BatchOutcome. What its failed
attempt recorded stays recorded: the model requests it sent (paid for), and its groups'
verdicts in the journal (a refused answer, a group sent to review after MAX_REJECTIONS,
a pair kept apart), which the retry reads as standing from an earlier night ("backing
off", "in review") and does not count again. Dropped with that attempt's tally, the
night's receipt under-counted model spend and lost the refusals, and a group sent to
review that night was listed in no receipt's failures (audit 52d2).

So a throttled attempt leaves its spend and verdicts here (``leave``), keyed by the run,
its attempt and the batch's shards (a Prefect task's retries and the local engine's run
in the same process), and the attempt that ends the batch takes them: the successful
retry (``join``) or the batch's failed-shard outcome. Spend is summed over the attempts;
a group's verdict is counted once: the latest attempt's where it made one itself (nothing
of the earlier one landed, so it sent the group again), else the earlier one's in place
of the count the retry gave the group for it (``Tally.standins``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from memlife.apply.tally import Tally

if TYPE_CHECKING:
    from memlife.run_types import RunContext, Shard

# counts that are model spend (added whatever became of the request), not verdicts
SPEND = ("model_probes", "model_usage_estimated")
# the attribute a throttled batch's exception carries: where its attempts' tally waits
KEY_ATTR = "memlife_carry_key"

CarryKey = tuple[str, str, str, str | None, tuple["Shard", ...]]

_lock = threading.Lock()  # batches run in threads (the Prefect fan-out's max_workers)
_left: dict[CarryKey, Tally] = {}


def key_of(ctx: RunContext, shards: Sequence[Shard]) -> CarryKey:
    """One batch of one run attempt: no other batch, run or attempt takes its tally."""
    return (ctx.run_id, ctx.run_key, ctx.mode, ctx.config.attempt, tuple(shards))


def kept(attempt: Tally) -> Tally:
    """What of a throttled attempt's tally outlives it: its model spend, its verdicts."""
    out = Tally(
        model_calls=attempt.model_calls,
        input_tokens=attempt.input_tokens,
        output_tokens=attempt.output_tokens,
    )
    for name in SPEND:
        if attempt.counts.get(name):
            out.counts[name] = attempt.counts[name]
    for key, v in attempt.verdicts.items():
        out.verdict(key, v)
    return out


def join(earlier: Tally | None, into: Tally) -> None:
    """Add ``earlier`` (what the batch's throttled attempts left) to a later attempt's
    tally ``into``: spend summed; each verdict once (see the module's docstring)."""
    if earlier is None:
        return
    into.model_calls += earlier.model_calls
    into.input_tokens += earlier.input_tokens
    into.output_tokens += earlier.output_tokens
    for name in SPEND:
        if earlier.counts.get(name):
            into.counts[name] += earlier.counts[name]
    for key, v in earlier.verdicts.items():
        if key in into.verdicts:
            continue  # the later attempt sent the group again and journaled its own verdict
        stand_in = into.standins.pop(key, None)
        if stand_in is not None:  # counted for this very verdict, as if an earlier night's
            into.counts[stand_in] -= 1
            if into.counts[stand_in] <= 0:
                del into.counts[stand_in]
        into.verdict(key, v)


def leave(key: CarryKey, attempt: Tally, earlier: Tally | None, exc: BaseException) -> None:
    """A throttled attempt ends: what it and the earlier ones recorded waits for the next
    attempt (``take``), and ``exc`` names where (the retry loop that gives up takes it)."""
    left = kept(attempt)
    join(earlier, left)
    with _lock:
        _left[key] = left
    try:
        setattr(exc, KEY_ATTR, key)
    except AttributeError:  # an exception type without a __dict__: the retry still finds it
        pass


def take(key: CarryKey) -> Tally | None:
    """What the batch's throttled attempts left, taken (None: none was throttled)."""
    with _lock:
        return _left.pop(key, None)


def taken_by(exc: BaseException | str) -> Tally | None:
    """What the throttled attempts that ended in ``exc`` left, taken (for a failed batch)."""
    key = getattr(exc, KEY_ATTR, None)
    return take(key) if key is not None else None
