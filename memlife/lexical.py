"""BM25 over one set of memories, and who speaks in each: built once, then appended and
removed in place.

The lexical half of recall's hybrid ranking (:mod:`memlife.retrieval`): it rescues names
and rare nouns a sentence vector blurs. The same index keeps each memory's speakers
(:func:`memlife.speakers.speakers`, "Caroline: ..."), which the speaker term matches
against the names a query gives.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import Stemmer

from memlife.speakers import speakers
from memlife.text import STOPWORDS, fold_accents

BM25_K1 = 1.5
BM25_B = 0.75

_WORD = re.compile(r"[a-z0-9]+")
# A word of any script: letters and digits, and the marks Indic, Arabic, Hebrew, Thai, Lao,
# Burmese and Khmer words carry inside them (re has no \p{M}; these blocks hold those
# scripts' marks; Burmese and Khmer whole, but for their punctuation).
_ANY_WORD = re.compile(
    "(?:[^\\W_]|[\u0483-\u0489\u0591-\u05c7\u0610-\u061a\u064b-\u065f\u0670"
    "\u06d6-\u06ed\u0900-\u0dff\u0e31-\u0e4e\u0eb1-\u0ecd\u0f18-\u0fbc"
    "\u1000-\u1049\u1050-\u109f\u1780-\u17d3\u17dd-\u17f9"
    "\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f])+"
)
# Han ideographs and kana: written without spaces, so a run of them is read as overlapping
# character bigrams and unigrams, as Lucene's CJK bigram filter with unigrams does (Hangul
# is written with spaces).
_CJK_RUN = re.compile(
    "([\u3005-\u3007\u303b\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f]+)"
)  # iteration marks (々), ideographic zero (〇), the supplementary ideographs (𠮷)
# Thai, Lao, Khmer and Burmese are written without spaces between words too.
_SOUTHEAST_RUN = re.compile("([\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u19e0-\u19ff]+)")
# A row's speakers share its postings under this prefix; no word of a text or query has it.
_SPEAKER = "\x00speaker:"
_stemmers = threading.local()  # PyStemmer objects must not be shared across threads


def _stemmer() -> Stemmer.Stemmer:
    st = getattr(_stemmers, "st", None)
    if st is None:
        st = _stemmers.st = Stemmer.Stemmer("english")
    return st


def tokenize(text: str) -> list[str]:
    """Lowercased, stopword-free, Snowball-stemmed word tokens (the BM25 vocabulary).
    Text that is not ASCII has its accents and case folded first and keeps words of every
    script ("café" is "cafe"; a Cyrillic or Hindi memory gets terms, which [a-z0-9] gave none);
    Chinese and Japanese, written without spaces, are read as character bigrams."""
    if text.isascii():
        found = _WORD.findall(text.lower())
    else:
        found = [w for word in _ANY_WORD.findall(fold_accents(text)) for w in _unspaced(word)]
    words = [w for w in found if w not in STOPWORDS]
    stems: list[str] = _stemmer().stemWords(words)
    return stems


def unspaced_script(ch: str) -> bool:
    """A character of a script written without spaces between words (Chinese, Japanese,
    Thai, Khmer...): a word edge may sit anywhere inside a run of them."""
    return bool(_CJK_RUN.match(ch) or _SOUTHEAST_RUN.match(ch))


def _unspaced(word: str) -> list[str]:
    """A word as itself, or with its runs of Han and kana as overlapping bigrams and single
    characters ("東京" -> "東京", "東", "京"): a bigram match outweighs its characters' (rarer
    terms), and a one-character word ("茶", tea) is still found. Thai, Lao, Khmer and Burmese
    runs give bigrams only: one of their letters alone means nothing."""
    if _CJK_RUN.search(word) is None and _SOUTHEAST_RUN.search(word) is None:
        return [word]
    out: list[str] = []
    for i, part in enumerate(_CJK_RUN.split(word)):
        if i % 2 == 0:  # between runs: letters of another script ("iphone" in "iphone手机")
            out += _bigrams(part, _SOUTHEAST_RUN, unigrams=False)
        else:
            out += [part[j : j + 2] for j in range(len(part) - 1)] + list(part)
    return out


def _bigrams(word: str, run: re.Pattern[str], *, unigrams: bool) -> list[str]:
    """``word`` with each run ``run`` matches read as overlapping bigrams (and its single
    characters, with ``unigrams``); the rest kept whole. A one-character run is itself."""
    out: list[str] = []
    for i, part in enumerate(run.split(word)):
        if i % 2 == 0 or len(part) == 1:
            out += [part] if part else []
        else:
            out += [part[j : j + 2] for j in range(len(part) - 1)]
            out += list(part) if unigrams else []
    return out


@dataclass(frozen=True)
class Corpus:
    """BM25's statistics over several indexes taken as one (recall over many namespaces):
    rows, total length, and the document frequency of each of a query's terms."""

    n: int
    total_length: float
    df: dict[str, int]


def corpus_of(indexes: Sequence[LexicalIndex], query: str) -> Corpus:
    """The statistics ``query``'s terms have over the union of ``indexes``."""
    terms = dict.fromkeys(tokenize(query))
    df = {t: sum(ix.df(t) for ix in indexes) for t in terms}
    return Corpus(sum(len(ix) for ix in indexes), sum(ix.total_length() for ix in indexes), df)


class LexicalIndex:
    """BM25 (Okapi, Lucene idf) over texts that can be appended and swap-removed.

    Postings keep raw term frequencies; a term's weights (idf, length norm) are computed
    from the current n, df and average length the first time a query asks for the term,
    then kept until the next append or remove. A fixed corpus (the gate, the benchmarks)
    therefore pays the weight once per term, as if baked in at build time; an online
    shard (``memlife.online.index``) adds a record in O(its tokens) instead of a rebuild
    (O(all tokens): ~0.5 s at 10k memories).
    """

    def __init__(self, texts: Sequence[str] = (), *, k1: float = BM25_K1, b: float = BM25_B):
        self.k1, self.b = k1, b
        self.n = 0
        self._docs: list[dict[str, int]] = []
        self._lengths = np.zeros(max(16, len(texts)), dtype=np.float64)
        self._postings: dict[str, dict[int, int]] = {}
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}  # term -> (rows, tf)
        self._weights: dict[str, np.ndarray] = {}  # term -> float32 BM25 per posting row
        for t in texts:
            self.append(t)

    def __len__(self) -> int:
        return self.n

    def append(self, text: str) -> int:
        """Add ``text`` as the next row; returns its row."""
        counts: dict[str, int] = {}
        for term in tokenize(text):
            counts[term] = counts.get(term, 0) + 1
        length = sum(counts.values())
        for key in speakers(text):
            counts[_SPEAKER + key] = 1  # not a word of the text: BM25 never sees it
        row = self.n
        if row == len(self._lengths):
            self._lengths = np.concatenate([self._lengths, np.zeros_like(self._lengths)])
        self._lengths[row] = length
        self._docs.append(counts)
        for term, tf in counts.items():
            self._postings.setdefault(term, {})[row] = tf
            self._arrays.pop(term, None)
        self.n += 1
        self._weights.clear()  # n and the average length moved: every weight is stale
        return row

    def remove(self, row: int) -> None:
        """Remove ``row``; the last row moves into its place (the online shard does the same)."""
        last = self.n - 1
        for term in self._docs[row]:
            post = self._postings[term]
            del post[row]
            if not post:
                del self._postings[term]
            self._arrays.pop(term, None)
        if row != last:
            moved = self._docs[last]
            for term, tf in moved.items():
                post = self._postings[term]
                del post[last]
                post[row] = tf
                self._arrays.pop(term, None)
            self._docs[row] = moved
            self._lengths[row] = self._lengths[last]
        self._docs.pop()
        self._lengths[last] = 0.0
        self.n -= 1
        self._weights.clear()

    def _rows(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        """(rows, raw tf) of ``term``, kept until a row holding it changes; None: no row."""
        got = self._arrays.get(term)
        if got is None:
            post = self._postings.get(term)
            if not post:
                return None
            ids = np.fromiter(post.keys(), dtype=np.int64, count=len(post))
            tf = np.fromiter(post.values(), dtype=np.float64, count=len(post))
            got = self._arrays[term] = (ids, tf)
        return got

    def df(self, term: str) -> int:
        """Rows holding ``term`` (a token as :func:`tokenize` gives it)."""
        return len(self._postings.get(term, ()))

    def total_length(self) -> float:
        return float(self._lengths[: self.n].sum())

    def speaking(self, common: Iterable[str]) -> set[str]:
        """Of ``common`` (words that may be names), those some row has as a speaker."""
        return {c for c in common if _SPEAKER + c in self._postings}

    def speaker_share(self, sure: Iterable[str], common: Iterable[str] = ()) -> np.ndarray:
        """Per row, the share of the names a query gives (keys, as
        :func:`memlife.speakers.query_names` gives them) that speak in it: float32 (n,).
        A ``common`` word ("Will", "May") is a name only where some row has it as a speaker."""
        names = set(sure) | self.speaking(common)
        out = np.zeros(self.n, dtype=np.float32)
        if not names or not self.n:
            return out
        for key in names:
            got = self._rows(_SPEAKER + key)
            if got is not None:
                out[got[0]] += 1.0
        return out / np.float32(len(names))

    def _posting(self, term: str, corpus: Corpus | None) -> tuple[np.ndarray, np.ndarray] | None:
        """(rows, BM25 weight per row) of ``term``, or None when no row holds it; weighed
        by this index's statistics (kept until it changes), or by ``corpus``'s."""
        got = self._rows(term)
        if got is None:
            return None
        ids, tf = got
        w = self._weights.get(term) if corpus is None else None
        if w is None:
            lengths = self._lengths[: self.n]
            if corpus is None:
                n, total, df = self.n, float(lengths.sum()), len(ids)
            else:
                n, total, df = corpus.n, corpus.total_length, corpus.df[term]
            avg = total / n if total else 1.0
            k1, b = self.k1, self.b
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            norm = k1 * (1.0 - b + b * lengths[ids] / avg)
            w = (idf * tf * (k1 + 1.0) / (tf + norm)).astype(np.float32)
            if corpus is None:
                self._weights[term] = w
        return ids, w

    def scores(self, query: str, corpus: Corpus | None = None) -> np.ndarray:
        """BM25 score of every text for ``query``: float32 (n,), zeros where nothing matches.
        ``corpus``: weigh terms as in the union of several indexes (:func:`corpus_of`)."""
        out = np.zeros(self.n, dtype=np.float32)
        if not self.n:
            return out
        # each term once, in the query's order: a set's order is the process's string
        # hashing, and float32 sums in another order differ in the last bit
        for term in dict.fromkeys(tokenize(query)):
            hit = self._posting(term, corpus)
            if hit is not None:
                out[hit[0]] += hit[1]  # rows are unique within one posting list
        return out
