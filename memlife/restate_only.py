"""Where "only" stands, for memlife/restate.py (kept apart: restate.py is at its size bound)."""

from __future__ import annotations

from collections import Counter

# what a clause-opening "only" restricts when no link or time word follows it: the subject
# after it ("Only she knows the password" is not "She knows only the password": audit 53x5)
_SUBJECT = "\x04subject"
# words that open another clause (restate's conjunctions, clause ends and subordinating
# words, less those that are links too: "only after work" keeps "after"): no scan passes one
_OPENS = frozenset(
    "and or but although though whereas however because when while who whom whose which "
    "where if unless".split()
)


def only_scopes(
    tokens: list[str],
    folded: list[str],
    marks: frozenset[str],
    filler: frozenset[str],
    ends: frozenset[str],
) -> Counter[tuple[str, str]]:
    """What each "only" restricts where its place says so (audit 51x5): a phrase a link or
    time word opens ("only on Sundays", "on Sundays only", "in only two weeks"), the
    subject where "only" opens its clause ("Only I drink tea"), else nothing marked ("I
    only drink tea" / "I drink only tea" still restate). "Eats meat only on Sundays" is not
    "eats only meat on Sundays": the bag of words, the same in both, missed the move.
    ``tokens``: words and clause marks (``marks``); ``folded``: the words casefolded;
    ``filler``: words that are skipped; ``ends``: link and time words (restate._PART_ENDS).
    No scan passes a word that opens another clause: "tea in the morning only and coffee at
    night" keeps "only" with "in" (audit 53x5)."""
    clause, where = 0, []
    for tok in tokens:
        if tok in marks:
            clause += 1
        else:
            where.append(clause)

    def near(i: int, step: int, count: int) -> list[int]:
        """Up to ``count`` words of i's clause that are not filler ("I" is a word here: the
        subject), from i on by ``step`` (each scan stops at the clause's end or at a word
        kept: linear in the text)."""
        found: list[int] = []
        j = i + step
        while 0 <= j < len(folded) and where[j] == where[i] and len(found) < count:
            if folded[j] in _OPENS:
                break
            if folded[j] not in filler or folded[j] == "i":
                found.append(j)
            j += step
        return found

    out: Counter[tuple[str, str]] = Counter()
    for i, w in enumerate(folded):
        if w == "only":
            after, before = near(i, 1, 1), near(i, -1, 2)
            if before and folded[before[0]] in ends:  # "in only two weeks": "only in ..."
                tag = folded[before[0]]
            elif after:  # the word after it, else (it ends a clause) the two before it
                tag = folded[after[0]] if folded[after[0]] in ends else ""
                tag = tag or ("" if before else _SUBJECT)
            else:
                tag = next((folded[j] for j in before if folded[j] in ends), "")
            out[("\x03only", tag)] += 1
    return out
