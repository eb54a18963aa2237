"""Does a statement say again what another says, with nothing left out?

Two statements close in meaning (a high cosine) can still differ in the one word that
matters: "allergic to two medications" / "three", "runs 5 km" / "5 miles", "her brother" /
"her sister", "moved to Sweden" / "moved from Sweden", "Caroline gave Melanie a
painting" / "Melanie gave Caroline a painting" (adversarial review on LoCoMo). A merge or
a refresh keeps one text and drops the other, so both must say the same words: the same
content words once filler (articles, "and", "very") is set aside and inflection is folded
(Snowball), in any order ("I only drink tea" / "I drink only tea"), with
- the same names in the same order;
- the same tense of be/have/do ("had cancer" is not "have cancer") and of every other
  verb: a regular past is not its present ("worked at Google" is not "works at Google",
  "lived in Berlin" not "lives"), while "likes" is "like" and "dogs" "dog" (an irregular
  past is another stem already: "went" / "goes", "taught" / "teaches");
- the same signs, comparisons, percents and currencies ("-18" is not "18", "$900" not
  "€900", "<7%" not ">7%", blood type "A+" not "A-", "C++" not "C");
- each number with the same word after it ("two dogs and one cat" is not "one dog and two
  cats");
- the words after "the", "a", "my"... in the same order where both texts have as many
  ("the dog bit the man" is not "the man bit the dog").
Rewordings with other words are not merged on this rule: a missed merge, never a lost
specific.
"""

from __future__ import annotations

import re
import threading
from collections import Counter

import Stemmer

from memlife.text import NUMBER_WORDS, symbols_as_words

# words whose presence or absence changes no fact; prepositions, numbers, comparatives,
# time words and negations are NOT here: "to"/"from", "more"/"less", "this"/"last" year
# all matter ("any" after a negation, "also" and "very" do not)
_FILLER = frozenset("a an the be been being and any some very really just also i".split())
# be/have/do keep their tense, not their person: "is"/"are" say the same, "is"/"was" do not
_TENSE = {
    **dict.fromkeys(("is", "are", "am"), "\x00be"), **dict.fromkeys(("was", "were"), "\x00was"),
    **dict.fromkeys(("has", "have"), "\x00have"), "had": "\x00had",
    **dict.fromkeys(("do", "does"), "\x00do"), "did": "\x00did",
}  # fmt: skip
# a regular past: a word ending in "ed" that the stemmer shortens ("worked" -> "work", not
# "need", "bed" or "speed"); it keeps its stem, marked past, so "worked" / "works" differ
_PAST = "\x00ed"
_WORD = re.compile(r"\w+")
_DETERMINERS = frozenset("the a an my your his her its our their this that these those".split())
_local = threading.local()  # PyStemmer objects must not be shared across threads


def _stem(words: list[str]) -> list[str]:
    st = getattr(_local, "st", None)
    if st is None:
        st = _local.st = Stemmer.Stemmer("english")
    stems: list[str] = st.stemWords(words)
    return stems


def _tensed(word: str, stem: str) -> str:
    """The word's stem, with its tense where tense is a fact: be/have/do (_TENSE), and a
    regular past ("worked") apart from the present ("works", "work")."""
    tense = _TENSE.get(word)
    if tense is not None:
        return tense
    if word.endswith("ed") and stem != word and word not in NUMBER_WORDS:  # not "hundred"
        return stem + _PAST
    return stem


def _shape(text: str) -> tuple[frozenset[tuple[str, int]], tuple[str, ...], tuple[str, ...],
                               frozenset[tuple[tuple[str, str], int]]]:  # fmt: skip
    """(content words counted, names in order, the words after a determiner in order, each
    number with its next word counted): a name is a capitalised (not all-capitals) word
    after the first."""
    raw = _WORD.findall(symbols_as_words(text))
    folded = [w.casefold() for w in raw]
    stems = [_tensed(f, s) for f, s in zip(folded, _stem(folded), strict=True)]
    keep = [i for i, f in enumerate(folded) if f not in _FILLER]
    names = tuple(
        stems[i] for i in keep if raw[i][:1].isupper() and not raw[i].isupper() and i != keep[0]
    )  # fmt: skip
    after = tuple(stems[i + 1] for i in range(len(raw) - 1)
                  if folded[i] in _DETERMINERS and folded[i + 1] not in _FILLER)  # fmt: skip
    content = [stems[i] for i in keep]
    numbers = Counter(
        (w, content[j + 1]) for j, w in enumerate(content[:-1])
        if w.isdigit() or w in NUMBER_WORDS
    )  # fmt: skip
    return frozenset(Counter(content).items()), names, after, frozenset(numbers.items())


def restates(a: str, b: str) -> bool:
    """True when ``a`` and ``b`` say the same words (up to filler, inflection other than
    tense and an order that carries no role: module doc) with the same names: keeping
    either loses nothing."""
    words_a, names_a, after_a, numbers_a = _shape(a)
    words_b, names_b, after_b, numbers_b = _shape(b)
    same_roles = len(after_a) != len(after_b) or after_a == after_b  # an article dropped
    return words_a == words_b and names_a == names_b and numbers_a == numbers_b and same_roles
