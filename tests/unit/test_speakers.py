"""The speaker term: who speaks in a memory, whom a question names, and how recall uses both."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memlife.lexical as lexical_module
from memlife.lexical import LexicalIndex
from memlife.retrieval import rank, rank_sets
from memlife.speakers import SPEAKER_WINDOW, QueryNames, name_key, query_names, speakers


def test_a_question_names_the_people_it_asks_about_not_its_first_word() -> None:
    def sure(text: str) -> list[str]:
        return query_names(text).sure

    assert sure("When did Caroline go to the LGBTQ support group?") == ["caroline", "lgbtq"]
    assert sure("What did Melanie's son do on 8 May, 2023?") == ["melanie"]
    assert sure("Tell me what Jon said. Remind me about Paris.") == ["jon", "paris"]
    assert sure("Would Calvin enjoy the Hollywood Bowl, Calvin?") == [
        "calvin",
        "hollywood",
        "bowl",
    ]
    # an opening quote opens a title, not a name; stopwords capitalised mid-sentence are no names
    assert sure('Did he read "Nothing is impossible" or The Hobbit?') == ["hobbit"]
    assert sure("what did the user say about the budget?") == []
    assert sure("") == []
    # a title's dot ends no sentence, and the title is no name ("Mr. Smith" is Smith)
    assert sure("What did Mr. Smith sell to Dr. Lee?") == ["smith", "lee"]
    # accents and case folded, whole words, any script, possessives off
    assert sure("Où est allé Zoë avec O’Brien's Ærø?") == ["zoe", "o'brien", "ærø"]
    assert sure("Что сказал Дмитрий?") == [name_key("Дмитрий")]


def test_a_common_word_is_a_name_only_where_someone_speaks_under_it() -> None:
    """ "Will", "May", "June": names of people and common words. One counts only in a store
    where a memory has it as a speaker; otherwise it dilutes no one's share."""
    asked = query_names("What did Will and Ann say about the trip in June?")
    assert asked == QueryNames(sure=["ann"], common=["will", "june"])
    with_will = LexicalIndex(["Will: I booked it.", "Ann: I paid.", "We go in June."])
    assert with_will.speaker_share(*asked).tolist() == [0.5, 0.5, 0.0]
    without = LexicalIndex(["Bob: I booked it.", "Ann: I paid.", "We go in June."])
    assert without.speaker_share(*asked).tolist() == [0.0, 1.0, 0.0]


def test_a_memory_speaks_through_lines_that_open_with_a_name_and_a_colon() -> None:
    assert speakers("Caroline: I went to the support group yesterday.") == ["caroline"]
    assert speakers("Dr. Ann Lee: take two.\r\nBob: thanks\n  Bob: again") == [
        "ann",
        "lee",
        "bob",
    ]
    # chat exports: a list mark, a time, bold, a colon that ends the line, particles
    for line in (
        "- **Caroline**: hi",
        "[10:30] Caroline: hi",
        "Caroline:\nI went",
        "> Caroline: x",
    ):
        assert speakers(line) == ["caroline"], line
    assert speakers("Ludwig van Beethoven: hi") == ["ludwig", "beethoven"]
    assert speakers("de Souza: obrigado") == ["souza"]  # a particle may open the line
    assert speakers("de: nothing\nvan der: nobody") == []  # particles alone name no one
    assert speakers("Zoë: salut") == ["zoe"] and speakers("Will: hi") == ["will"]
    # a sentence with a colon in it, a time, a link or lowercase words are no speaker
    assert speakers("Caroline went there: it was fun") == []
    assert speakers("10:30 meeting; see http://example.com: now") == []
    assert speakers("user: dark mode please") == []
    assert speakers("Caroline:no space") == []
    # bounded work: a speaker line past the window is not read
    assert speakers("x" * SPEAKER_WINDOW + "\nCaroline: late") == []


def test_the_index_gives_each_row_the_share_of_the_named_who_speak_in_it() -> None:
    idx = LexicalIndex(
        [
            "Caroline: I went to the support group.",
            "Melanie: Caroline told me about the support group.",
            "Caroline: hi\nMelanie: hello",
            "Caroline went to the support group.",
        ]
    )
    assert idx.speaker_share(["caroline"]).tolist() == [1.0, 0.0, 1.0, 0.0]
    assert idx.speaker_share(["caroline", "melanie"]).tolist() == [0.5, 0.5, 1.0, 0.0]
    assert idx.speaker_share(["nobody"]).tolist() == [0.0] * 4
    assert idx.speaker_share([]).tolist() == [0.0] * 4
    assert LexicalIndex().speaker_share(["caroline"]).shape == (0,)
    # names are not stemmed: Ann is not Anne
    assert LexicalIndex(["Anne: hi", "Ann: hi"]).speaker_share(["ann"]).tolist() == [0.0, 1.0]


def test_speakers_leave_bm25_as_it_was(monkeypatch) -> None:
    """Speakers share the postings under a prefix no word has: BM25 scores, lengths and
    document frequencies are those of an index that knows no speakers."""
    texts = ["Caroline: Caroline painted a lake.", "Melanie: I ran.", "a lake, a run"]
    with_speakers = LexicalIndex(texts)
    monkeypatch.setattr(lexical_module, "speakers", lambda text: [])
    without = LexicalIndex(texts)
    for q in ("Caroline lake", "ran", "Melanie", "speaker caroline"):
        assert with_speakers.scores(q).tolist() == without.scores(q).tolist(), q
    assert without.speaker_share(["caroline"]).tolist() == [0.0, 0.0, 0.0]


_NAMES = ["Ann", "Bob", "Cy"]
_KEYS = [[n.lower()] for n in _NAMES] + [["bob", "cy"], [n.lower() for n in _NAMES]]


def _shares_of(rows: list[str], names: list[str]) -> list[float]:
    return [sum(n in speakers(r) for n in names) / len(names) for r in rows]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("add"), st.sampled_from(_NAMES + ["note"]), st.sampled_from(_NAMES)),
            st.tuples(st.just("remove"), st.integers(0, 40), st.just("")),
        ),
        max_size=60,
    )
)
def test_speaker_shares_survive_appends_and_swap_removes(ops) -> None:
    """The online shard appends and swap-removes rows: after every step, every share must
    be what the rows as they stand say (read between the steps, so a cached posting that a
    step left stale is caught), and BM25 must agree with a fresh index."""
    idx, rows = LexicalIndex(), []
    for op, a, b in ops:
        if op == "add":
            text = f"{a}: I met {b} today" if a != "note" else f"I met {b}"
            idx.append(text)
            rows.append(text)
        elif rows:
            row = int(a) % len(rows)
            idx.remove(row)
            rows[row] = rows[-1]
            rows.pop()
        for names in _KEYS:
            assert np.allclose(idx.speaker_share(names), _shares_of(rows, names))
        assert idx.scores("met bob").tolist() == LexicalIndex(rows).scores("met bob").tolist()


def test_recall_prefers_the_turn_said_by_whom_the_question_names() -> None:
    """Two turns alike in every other term: the question about Caroline finds hers first,
    and the same ranking without the term keeps the tie's order (lower row first)."""
    texts = ["Melanie: I went to the support group.", "Caroline: I went to the support group."]
    vecs = np.tile(np.eye(4, dtype=np.float32)[:1], (2, 1))
    q = np.eye(4, dtype=np.float32)[0]
    ask = "When did Caroline go to the support group?"
    kw = {"k": 2, "query_text": ask, "texts": texts, "lexical_weight": 0.0, "centroid_weight": 0}
    assert rank(q, vecs, **kw).indices.tolist() == [1, 0]
    assert rank(q, vecs, speaker_weight=0.0, **kw).indices.tolist() == [0, 1]
    # "Mr. Smith" is Smith, not every speaker called Mr.
    turns = ["Mr. Jones: I sold the car.", "Smith: I sold the car."]
    smith = kw | {"texts": turns, "query_text": "What did Mr. Smith sell?"}
    assert rank(q, vecs, **smith).indices.tolist() == [1, 0]


def test_a_query_naming_nobody_reads_no_index_and_weights_of_zero_mean_dense_only() -> None:
    vecs = np.eye(3, dtype=np.float32)
    q = np.array([0.6, 0.8, 0.0], dtype=np.float32)
    dense = rank(q, vecs, k=3, centroid_weight=0).indices.tolist()
    bad = LexicalIndex(["Bob: one"])  # the wrong length: an error only where it is read
    for ask in ("what about it?", "Did Bob call?"):
        off = {"query_text": ask, "lexical": bad, "lexical_weight": 0.0, "speaker_weight": 0.0}
        assert rank(q, vecs, k=3, centroid_weight=0, **off).indices.tolist() == dense
    got = rank(q, vecs, k=3, centroid_weight=0, query_text="what?", lexical=bad, lexical_weight=0)
    assert got.indices.tolist() == dense
    with pytest.raises(ValueError, match="lexical index has 1 texts"):
        rank(q, vecs, k=3, query_text="Did Bob call?", lexical=bad, lexical_weight=0.0)


class _Namespace:
    """One namespace's candidates as rank_sets reads them (an online shard's shape)."""

    def __init__(self, ids: list[str], texts: list[str]) -> None:
        self.ids = ids
        self.vectors = np.tile(np.eye(4, dtype=np.float32)[:1], (len(ids), 1))
        self.lexical = LexicalIndex(texts)
        self.created = np.zeros(len(ids))
        self.centroid = None


def test_one_namespaces_speakers_never_lift_anothers_memories() -> None:
    """Caroline speaks only in namespace A: a memory in B that merely names her gains
    nothing from A's speakers beside A, and A's turn of hers is lifted. (Ranked together,
    the sets rank as their union: tests/unit/test_rank_sets.py.)"""
    q = np.eye(4, dtype=np.float32)[0]
    ask = "When did Caroline go to the support group?"
    a = _Namespace(["a0"], ["Caroline: I went to the support group."])
    b = _Namespace(["b0"], ["Melanie: Caroline went to the support group."])
    b.created = np.array([1e6])  # another day: no conversation context between them
    both = {r.id: r.score for r in rank_sets(q, ask, [a, b], k=2, threshold=-1.0)}
    union = {"k": 2, "threshold": -1.0, "query_text": ask,
             "lexical": LexicalIndex(["Caroline: I went to the support group.",
                                      "Melanie: Caroline went to the support group."]),
             "created": np.array([0.0, 1e6])}  # fmt: skip
    vecs = np.concatenate([a.vectors, b.vectors])

    def scores(**kw: float) -> dict[str, float]:
        hits = rank(q, vecs, **union, **kw)  # type: ignore[arg-type]
        return {
            ["a0", "b0"][int(i)]: float(s) for i, s in zip(hits.indices, hits.scores, strict=True)
        }

    said, unsaid = scores(), scores(speaker_weight=0.0)
    assert both == pytest.approx(said)
    assert said["b0"] == unsaid["b0"]  # naming her is not being her
    assert said["a0"] > unsaid["a0"]
