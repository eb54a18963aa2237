"""Where compaction may cut inside a turn of tool rounds (memlife/online/compaction.py).

A cut falls before an assistant message that follows a user message of tool results, so
a ``tool_use`` and its results are never split. With extended thinking (not interleaved)
the model thinks once, at the start of a tool loop, and the API requires the loop's
assistant turn to open with that thinking block: in the current turn, the first round is
then kept and the summary of the rounds cut goes after its tool results.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from memlife.online.history import _blocks
from memlife.online.history import _has_tool_result as has_tool_result

THINKING = ("thinking", "redacted_thinking")


def round_start(messages: Sequence[Mapping[str, Any]], task: int, end: int) -> int:
    """Where the summary goes in the turn ``messages[task:end]``: the request itself, or,
    in the current turn whose first assistant message opens with thinking, the results of
    that first round (thinking must stay at the head of the loop it started)."""
    if end != len(messages) or task + 2 >= end:
        return task
    first = messages[task + 1]
    blocks = _blocks(first.get("content")) if first.get("role") == "assistant" else []
    opens = bool(blocks) and blocks[0].get("type") in THINKING
    return task + 2 if opens and has_tool_result(messages[task + 2]) else task


def round_cuts(
    messages: Sequence[Mapping[str, Any]], task: int, end: int, keep: int, at: int | None = None
) -> list[int]:
    """Where a cut may fall inside the turn ``messages[task:end]`` keeping at least its last
    ``keep`` rounds: before an assistant message that follows a user message of tool
    results. The round before it (a ``tool_use`` and the results answering it) then lies
    wholly in the summarised part: no pair is split. Empty: too few rounds. ``at``: where
    the kept head of the turn ends (``round_start``); cuts fall after it."""
    at = task if at is None else at
    if messages[task].get("role") != "user":  # an explicit turn begun by the assistant
        return []
    cuts = [
        i for i in range(at + 2, end)
        if messages[i].get("role") == "assistant" and has_tool_result(messages[i - 1])
    ]  # fmt: skip
    return cuts[: len(cuts) - keep + 1] if len(cuts) >= keep else []


def first_fitting(cands: Sequence[int], fits: Callable[[int], bool]) -> int:
    """The first of ``cands`` (ascending cuts: the later, the less is kept) that fits, else
    the last; a binary search (the kept part only shrinks along ``cands``), so about
    log2(len(cands)) counts, none for one candidate."""
    lo, hi = 0, len(cands) - 1  # the last one is taken anyway: never counted
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(cands[mid]):
            hi = mid
        else:
            lo = mid + 1
    return cands[lo]
