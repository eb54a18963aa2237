"""Audit 49m3 (session 49, mutation pass): ``restate_swap.traded`` (audit 49x5) is not tried
past ``MAX_SPAN`` differing words (its work grows with the cube of the span): pinned, so the
cap cannot go unnoticed (a stored text of thousands of words traded round would cost hours)."""

from __future__ import annotations

from memlife.restate_swap import MAX_SPAN, traded


def _runs(n: int) -> tuple[str, str]:
    first = " ".join(f"alpha{i}" for i in range(n))
    second = " ".join(f"beta{i}" for i in range(n))
    return f"Ana said {first} over {second} today", f"Ana said {second} over {first} today"


def test_runs_traded_within_the_cap_are_read() -> None:
    a, b = _runs(MAX_SPAN // 2 - 1)  # 2n + 1 differing words: within the cap
    assert traded(a, b)


def test_runs_traded_past_the_cap_are_not_tried() -> None:
    a, b = _runs(MAX_SPAN // 2)  # 2n + 1 = MAX_SPAN + 1 differing words
    assert not traded(a, b)
