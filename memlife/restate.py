"""Does a statement say again what another says, with nothing left out?

Two statements close in meaning (a high cosine) can still differ in the one word that
matters: "allergic to two medications" / "three", "runs 5 km" / "5 miles", "her brother" /
"her sister", "moved to Sweden" / "moved from Sweden", "Caroline gave Melanie a
painting" / "Melanie gave Caroline a painting" (adversarial review on LoCoMo). A merge or
a refresh keeps one text and drops the other, so both must say the same words: the same
content words once filler (articles, forms of be/have/do, "and") is set aside and
inflection is folded (Snowball), and the same names in the same order. Rewordings with
other words are not merged on this rule: a missed merge, never a lost specific.
"""

from __future__ import annotations

import re
import threading

import Stemmer

# words whose presence or absence changes no fact; prepositions, numbers, comparatives,
# time words and negations are NOT here: "to"/"from", "more"/"less", "this"/"last" year
# all matter ("any" after a negation, "also" and "very" do not)
_FILLER = frozenset(
    """a an the is are was were be been being am has have had do does did and
    any some very really just also i""".split()
)
_WORD = re.compile(r"\w+")
_local = threading.local()  # PyStemmer objects must not be shared across threads


def _stem(words: list[str]) -> list[str]:
    st = getattr(_local, "st", None)
    if st is None:
        st = _local.st = Stemmer.Stemmer("english")
    stems: list[str] = st.stemWords(words)
    return stems


def _shape(text: str) -> tuple[frozenset[str], tuple[str, ...]]:
    """(content words, names in order): a name is a capitalised (not all-capitals) word
    after the first."""
    words = [w for w in _WORD.findall(text) if w.casefold() not in _FILLER]
    stems = _stem([w.casefold() for w in words])
    names = tuple(
        s for w, s in zip(words, stems, strict=True)
        if w[:1].isupper() and not w.isupper() and w is not words[0]
    )  # fmt: skip
    return frozenset(stems), names


def restates(a: str, b: str) -> bool:
    """True when ``a`` and ``b`` say the same words (up to filler, inflection and order)
    with the same names in the same order: keeping either text loses nothing."""
    return _shape(a) == _shape(b)
