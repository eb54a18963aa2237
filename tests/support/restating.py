"""Both ways of `memlife.restate.restates`: a pair kept apart, or one statement said twice."""

from __future__ import annotations

from memlife.restate import restates


def neither(a: str, b: str) -> bool:
    """Two statements: neither restates the other (a merge would lose one)."""
    return not restates(a, b) and not restates(b, a)


def both(a: str, b: str) -> bool:
    """One statement said two ways: each restates the other."""
    return restates(a, b) and restates(b, a)
