"""Two texts that differ only by two words (or runs of words) traded places, in any language.

`memlife/restate.py` reads who does what to whom through English words: its negations
("not", "never"), clause ends ("but"), comparisons ("than", "over", "prefer ... to") and
prepositions. In another language none of them is read, so a text whose two objects trade
places kept every rule: "Alice est allergique aux arachides mais pas aux crevettes" restated
"... aux crevettes mais pas aux arachides" (an allergy denied, then affirmed), as did
"Prefiere el té al café" / "el café al té" and "aime le thé et déteste le café" / "aime le
café et déteste le thé" (audit 49x5): `remember` refreshed the old fact and dropped the new
one, and a night merged the two into whichever was newer.

This rule needs no word of any language but a list's joiners: the two texts are the same
words in the same order except that two runs of them traded places (``P X M Y S`` against
``P Y M X S``). That keeps every role only where the words between them (``M``) open and
close with joiners, "tea and coffee" / "coffee and tea", "tea, cake and coffee" / "coffee,
cake and tea", or are a joiner and a pronoun: whole clauses in another order ("likes tea
and she hates coffee"). The words just before ``X`` said again before ``Y`` are its item's
own (an article, "le thé et le café"; a verb, "is proud of Jon and is excited").
Runs next to each other (``M`` empty) are one word moved ("I only drink tea" / "I drink
only tea", "every morning she drinks coffee" / "she drinks coffee every morning"): read
as before, unless the move crosses a joiner inside the text (neither run at its start or
end): the word went into another clause or item ("isst kein Fleisch und trinkt Wein" /
"isst Fleisch und trinkt kein Wein", audit 53x5). A list joined by a word not listed
here (a language's "and" not in ``_JOINERS``) is kept apart: a missed merge, never a lost
fact.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(r"\w+|[,;/&+]")
# a list's or a clause's joiners: punctuation, and "and", "or", "nor", "but" of the
# languages memories are most often in
_JOINERS = frozenset(
    ", ; / & + and or nor but plus et ou ni mais y o e u pero ed od né und oder noch sowie "
    "aber maar и или но".split()
)
# a later clause's subject said again as a pronoun ("likes tea and she hates coffee")
_PRONOUNS = frozenset(
    "i you he she it we they je tu il elle on nous vous ils elles yo él ella ellos ellas "
    "io lui lei noi voi loro eu ele ela eles elas ich du er sie es wir ihr hij zij ze wij "
    "я ты он она оно мы вы они".split()
)
# past this many differing words the rule is not tried (its work grows with the cube of it)
MAX_SPAN = 64


def _words(text: str) -> list[str]:
    return [t.casefold() for t in _TOKEN.findall(text)]


def traded(a: str, b: str) -> bool:
    """Whether ``b`` is ``a`` with two runs of words traded places across words that are no
    list's joiners (module doc): the two say different things whatever the language."""
    x, y = _words(a), _words(b)
    if len(x) != len(y) or x == y:
        return False
    p = 0
    while x[p] == y[p]:
        p += 1
    s = 0
    while x[-1 - s] == y[-1 - s]:
        s += 1
    mid_a, mid_b = x[p : len(x) - s], y[p : len(y) - s]
    m = len(mid_a)
    if m > MAX_SPAN or sorted(mid_a) != sorted(mid_b):
        return False
    found = False  # a way to read the two as runs traded
    for lx in range(1, m):
        if mid_b[m - lx] != mid_a[0] or mid_b[m - lx :] != mid_a[:lx]:
            continue
        for ly in range(1, m - lx + 1):
            if mid_a[m - ly :] != mid_b[:ly] or mid_a[lx : m - ly] != mid_b[ly : m - lx]:
                continue
            if lx + ly == m and p and s and any(w in _JOINERS for w in mid_a):
                # a word moved past a joiner, inside the text: from one clause or item into
                # another ("isst kein Fleisch und trinkt Wein" / "isst Fleisch und trinkt
                # kein Wein", "non mangia carne e beve vino" / "mangia carne e non beve
                # vino": a negation the English rules do not read; audit 53x5)
                found = True
                continue
            if _innocent(mid_a[lx : m - ly], x[:p], _TOKEN.findall(a)[p - 1] if p else ""):
                return False  # one reading is a list reordered or a word moved: as before
            found = True
    return found


def _innocent(between: list[str], before: list[str], subject: str) -> bool:
    """Runs next to each other, a list's items or whole clauses: the words between them
    open and close with joiners, or are a joiner and a pronoun ("likes tea and she hates
    coffee"), less the words before the first run said again before the second (its
    item's own article, "le thé et le café", a verb said again, "is proud ... and is").
    ``subject`` is the word before the first run as written."""
    k = 0
    while k < len(between) and k < len(before) and between[-1 - k] == before[-1 - k]:
        k += 1
    between = between[: len(between) - k]
    if not between:
        return True
    rest = between[1:]  # after the joiner: a list's next items, or a clause's subject
    if between[0] not in _JOINERS:
        return False
    if between[-1] in _JOINERS:
        return True
    # whole clauses only where the pronoun takes up a named subject just before the first
    # run: after a verb or article said again ("bebe té y él bebe café"), a verb ("drinks
    # tea and he coffee") or another pronoun ("elle aime le thé et il déteste le café") it
    # is someone else's clause, and trading the runs trades who does what (audit 49r2)
    named = subject[:1].isupper() and subject.casefold() not in _PRONOUNS
    return k == 0 and named and all(w in _PRONOUNS for w in rest)
