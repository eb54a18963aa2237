"""Who speaks in a memory, and whom a question names: recall's speaker term.

Agents often keep raw conversation turns as memories ("Caroline: I went to the support
group yesterday"). Such a turn says "I" where a question says "Caroline", and most of an
actor's memories name the same two or three people, so neither the sentence vector nor
BM25 gives the person asked about much weight. The speaker term (:mod:`memlife.retrieval`)
adds, for each memory, the share of the names a question gives that speak in it. Held out
on LoCoMo raw turns, with the weights chosen on observations and turns together as the
defaults are, recall@5 0.7616 -> 0.7767; observations 0.8416 -> 0.8442 (BENCHMARKS.md,
"Issue 19, eleventh round"). A memory with no speaker line scores 0 and is ranked as before.
"""

from __future__ import annotations

import re

from memlife.text import STOPWORDS
from memlife.timeref import MONTHS

# How far into a memory speaker lines are looked for (bounded work for a pasted page).
SPEAKER_WINDOW = 64 * 1024
_WEEKDAYS = frozenset("monday tuesday wednesday thursday friday saturday sunday".split())
_WORD = re.compile(r"(?<![\w'’])[^\W\d_][\w'’-]*")
# a word that opens a sentence: first in the text, or after . ! ? : ; or an opening quote
_OPENER = re.compile(r"(?:^|[.!?:;]\s+|[\"“(\[]\s*)(?=[^\W\d_])")
_POSSESSIVE = re.compile(r"['’]s?$")
# "Name:" or "Dr. Ann Lee:" at the start of a line, then a space: one to three words
_SPEAKER_LINE = re.compile(
    r"^[ \t]*([^\W\d_][\w'’.-]*(?:[ \t]+[^\W\d_][\w'’.-]*){0,2}):[ \t]", re.M
)


def query_names(text: str) -> list[str]:
    """The names ``text`` gives, in order, each once: capitalised words that do not open a
    sentence (a question's first word is capitalised whatever it is: "Tell", "When") and
    are not stopwords, months or weekdays (dates are the date term's)."""
    openers = {m.end() for m in _OPENER.finditer(text)}
    names: dict[str, None] = {}  # ordered, each once, O(1) a word on a pasted page
    for m in _WORD.finditer(text):
        word = m.group()
        if not word[0].isupper() or m.start() in openers:
            continue
        word = _POSSESSIVE.sub("", word)
        low = word.lower()
        if low not in STOPWORDS and low not in MONTHS and low not in _WEEKDAYS:
            names[word] = None
    return list(names)


def speakers(text: str) -> list[str]:
    """The words of the speakers of ``text``: each line that starts with one to three
    capitalised words and a colon ("Caroline: ...", "Dr. Ann Lee: ...")."""
    out: dict[str, None] = {}
    for m in _SPEAKER_LINE.finditer(text, 0, SPEAKER_WINDOW):
        words = m.group(1).split()
        if all(w[0].isupper() for w in words):
            out.update(dict.fromkeys(words))
    return list(out)
