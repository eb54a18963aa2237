"""Where "only" stands, for memlife/restate.py (kept apart: restate.py is at its size bound)."""

from __future__ import annotations

from collections import Counter


def only_scopes(
    tokens: list[str],
    folded: list[str],
    marks: frozenset[str],
    filler: frozenset[str],
    ends: frozenset[str],
) -> Counter[tuple[str, str]]:
    """What each "only" restricts where its place says so (audit 51x5): a phrase a link or
    time word opens ("only on Sundays", "on Sundays only"), else nothing marked ("I only
    drink tea" / "I drink only tea" still restate). "Eats meat only on Sundays" is not
    "eats only meat on Sundays": the bag of words, the same in both, missed the move.
    ``tokens``: words and clause marks (``marks``); ``folded``: the words casefolded;
    ``filler``: words that are skipped; ``ends``: link and time words (restate._PART_ENDS)."""
    clause, where = 0, []
    for tok in tokens:
        if tok in marks:
            clause += 1
        else:
            where.append(clause)

    def near(i: int, step: int, count: int) -> list[int]:
        """Up to ``count`` words of i's clause that are not filler, from i on by ``step``
        (each scan stops at the clause's end or at a word kept: linear in the text)."""
        found: list[int] = []
        j = i + step
        while 0 <= j < len(folded) and where[j] == where[i] and len(found) < count:
            if folded[j] not in filler:
                found.append(j)
            j += step
        return found

    out: Counter[tuple[str, str]] = Counter()
    for i, w in enumerate(folded):
        if w == "only":  # the word after it, else (it ends a clause) the two before it
            look = near(i, 1, 1) or near(i, -1, 2)
            tag = next((folded[j] for j in look if folded[j] in ends), "")
            out[("\x03only", tag)] += 1
    return out
