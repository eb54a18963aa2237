"""The speaker term: who speaks in a memory, whom a question names, and how recall uses both."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import memlife.lexical as lexical_module
from memlife.lexical import LexicalIndex, tokenize
from memlife.retrieval import rank
from memlife.speakers import SPEAKER_WINDOW, query_names, speakers


def test_a_question_names_the_people_it_asks_about_not_its_first_word() -> None:
    assert query_names("When did Caroline go to the LGBTQ support group?") == ["Caroline", "LGBTQ"]
    assert query_names("What did Melanie's son do on 8 May, 2023?") == ["Melanie"]
    assert query_names("Tell me what Jon said. Remind me about Paris on Friday.") == [
        "Jon",
        "Paris",
    ]
    assert query_names("Would Calvin enjoy the Hollywood Bowl, Calvin?") == [
        "Calvin",
        "Hollywood",
        "Bowl",
    ]
    # an opening quote opens a title, not a name; stopwords capitalised mid-sentence are no names
    assert query_names('Did he read "Nothing is impossible" or The Hobbit?') == ["Hobbit"]
    assert query_names("what did the user say about the budget?") == []
    assert query_names("") == []
    assert query_names("Où est allé Zoë avec Ærøskøbing’s mayor?") == ["Zoë", "Ærøskøbing"]


def test_a_memory_speaks_through_lines_that_open_with_a_name_and_a_colon() -> None:
    assert speakers("Caroline: I went to the support group yesterday.") == ["Caroline"]
    assert speakers("Dr. Ann Lee: take two.\nBob: thanks\n  Bob: again") == [
        "Dr.",
        "Ann",
        "Lee",
        "Bob",
    ]
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
    assert idx.speaker_share(["Caroline"]).tolist() == [1.0, 0.0, 1.0, 0.0]
    assert idx.speaker_share(["Caroline", "Melanie"]).tolist() == [0.5, 0.5, 1.0, 0.0]
    assert idx.speaker_share(["Nobody"]).tolist() == [0.0] * 4
    assert idx.speaker_share([]).tolist() == [0.0] * 4
    assert LexicalIndex().speaker_share(["Caroline"]).shape == (0,)


def test_speakers_leave_bm25_as_it_was(monkeypatch) -> None:
    """Speakers share the postings under a prefix no word has: BM25 scores, lengths and
    document frequencies are those of an index that knows no speakers."""
    texts = ["Caroline: Caroline painted a lake.", "Melanie: I ran.", "a lake, a run"]
    with_speakers = LexicalIndex(texts)
    monkeypatch.setattr(lexical_module, "speakers", lambda text: [])
    without = LexicalIndex(texts)
    for q in ("Caroline lake", "ran", "Melanie", "speaker caroline"):
        assert with_speakers.scores(q).tolist() == without.scores(q).tolist(), q
    assert without.speaker_share(["Caroline"]).tolist() == [0.0, 0.0, 0.0]


_NAMES = ["Ann", "Bob", "Cy"]


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
    """The online shard appends and swap-removes rows: every share must equal a fresh
    index's over the rows as they stand."""
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
    fresh = LexicalIndex(rows)
    for names in (["Ann"], ["Bob", "Cy"], _NAMES):
        assert idx.speaker_share(names).tolist() == fresh.speaker_share(names).tolist()
        want = [
            sum(t in tokenize(" ".join(speakers(r))) for t in tokenize(" ".join(names)))
            / len(names)
            for r in rows
        ]
        assert np.allclose(idx.speaker_share(names), want)


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
