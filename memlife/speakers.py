"""Who speaks in a memory, and whom a question names: recall's speaker term.

Agents often keep raw conversation turns as memories ("Caroline: I went to the support
group yesterday"). Such a turn says "I" where a question says "Caroline", and most of an
actor's memories name the same two or three people, so neither the sentence vector nor
BM25 gives the person asked about much weight. The speaker term (:mod:`memlife.retrieval`)
adds, for each memory, the share of the names a question gives that speak in it. Held out
on LoCoMo raw turns, with the weights chosen on observations and turns together as the
defaults are, recall@5 0.7616 -> 0.7767; observations 0.8416 -> 0.8442 (BENCHMARKS.md,
"Issue 19, eleventh round"). A memory with no speaker line scores 0 and is ranked as before.

Names are matched as whole words, accents and case folded the same way on both sides
("Zoë" and "Zoe" are "zoe"; any script is kept), never stemmed ("Ann" is not "Anne"). A key-value line ("Favourite food: pizza")
reads as a speaker too; a question that names its key ("Caroline's Favourite Food") then
finds it, which is what it asks for.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from memlife.text import STOPWORDS, fold_accents
from memlife.timeref import MONTHS, WEEKDAYS

# How far into a memory speaker lines are looked for (bounded work for a pasted page).
SPEAKER_WINDOW = 64 * 1024
# A capitalised word that is also a common word or a date ("Will", "May", "June") is a
# name only where some memory has it as a speaker (LexicalIndex.speaker_share).
_COMMON = STOPWORDS | set(MONTHS) | WEEKDAYS
# Honorifics: not names themselves, and their dot ends no sentence ("Mr. Smith").
_TITLES = frozenset("mr mrs ms mx dr prof sir madam st jr sr".split())
_TITLE_DOT = re.compile(r"\b(Mr|Mrs|Ms|Mx|Dr|Prof|St|Jr|Sr)\.", re.I)
_PARTICLES = frozenset("van von de da del der den di du la le bin ibn al".split())
_WORD = re.compile(r"(?<![\w'’])[^\W\d_][\w'’-]*")
# a word that opens a sentence: first in the text, or after . ! ? : ; or an opening quote
_OPENER = re.compile(r"(?:^\s*|[.!?:;]\s+|[\"“(\[]\s*)(?=[^\W\d_])")
_POSSESSIVE = re.compile(r"['’ʼ]s?$")  # ʼ (U+02BC): the apostrophe some phones type
# One line's speaker: a list mark, a [time] and ** or __ may come first; then one to four
# words and a colon that ends the line or is followed by a space ("- **Dr. Ann Lee**: ok").
_SPEAKER_LINE = re.compile(
    r"^[ \t]*(?:[-*•>][ \t]*)?(?:\[[^\]\n]{0,32}\][ \t]*)?(?:\*\*|__)?"
    r"([^\W\d_][\w'’.-]*(?:[ \t]+[^\W\d_][\w'’.-]*){0,3})(?:\*\*|__)?:(?:\*\*|__)?(?=[ \t]|$)",
    re.M,
)


class QueryNames(NamedTuple):
    """The names a question gives: ``sure`` ones, and ``common`` words that are names only
    where a memory has them as a speaker ("Will", "May")."""

    sure: list[str]
    common: list[str]


def name_key(word: str) -> str:
    """How a name is compared: accents and case folded, the apostrophe made one character."""
    return fold_accents(word).replace("’", "'").replace("ʼ", "'")


def query_names(text: str) -> QueryNames:
    """The keys (:func:`name_key`) of the names ``text`` gives, each once, in order:
    capitalised words that do not open a sentence (a question's first word is capitalised
    whatever it is: "Tell", "When"), honorifics left out."""
    text = _TITLE_DOT.sub(lambda m: m.group(1) + " ", text)  # "Mr. Smith": Smith opens nothing
    openers = {m.end() for m in _OPENER.finditer(text)}
    sure: dict[str, None] = {}  # ordered, each once, O(1) a word on a pasted page
    common: dict[str, None] = {}
    for m in _WORD.finditer(text):
        word = m.group()
        if not word[0].isupper() or m.start() in openers:
            continue
        key = name_key(_POSSESSIVE.sub("", word))
        if key in _TITLES:
            continue
        (common if key in _COMMON else sure)[key] = None
    return QueryNames(list(sure), [k for k in common if k not in sure])


def speakers(text: str) -> list[str]:
    """The keys (:func:`name_key`) of the words naming the speakers of ``text``: each line
    that opens with capitalised words (lowercase particles such as "van" or "de" among
    them) and a colon ("Caroline: ...", "Dr. Ann Lee: ...", "- **Ludwig van Beethoven**:",
    "de Souza: ...")."""
    out: dict[str, None] = {}
    for m in _SPEAKER_LINE.finditer(text, 0, SPEAKER_WINDOW):
        words = m.group(1).split()
        named = [w for w in words if w[0].isupper()]
        if not named or not all(w[0].isupper() or w in _PARTICLES for w in words):
            continue  # a particle may open the line ("de Souza:"), not stand alone ("de:")
        for w in words:
            key = name_key(_POSSESSIVE.sub("", w.rstrip(".")))
            if w[0].isupper() and key not in _TITLES:
                out[key] = None
    return list(out)
