"""Audit 52c: facts written in emoji or symbols only, with the shipped embedder.

The bundled MiniLM's vocabulary has no emoji and few symbols: "👍", "👎", "✓" and "✗" are
all one unknown token ([UNK]), so their sentence vectors are the same vector (cosine 1.0,
over the near-duplicate bound). The restatement check that stands between a near
duplicate and a refresh (memlife/restate.py) reads no word in them, so it found nothing
that differs. Session 26 gave such texts keys of their own (``norm_sha256``) and
``test_text_unicode.py::test_remember_keeps_two_different_non_latin_facts`` holds
"👍"/"👎" apart, but only with a hash embedder: with the embedder every user gets,
``remember("👎")`` after "👍" refreshed the "👍" record (verified again) and the new fact
was never stored; the night joined such records as one statement the same way.
Real SQLite store, the bundled MiniLM; nothing mocked.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memlife.embed import default_embedder
from memlife.group import InferenceItem, _statement_leaders
from memlife.ledger import AccessLedger
from memlife.online.memory import LongTermMemory
from memlife.stores.sqlite import SqliteStore
from memlife.text import negates, norm_sha256

NS = "/users/u1/facts"
PAIRS = [("👍", "👎"), ("✓", "✗"), ("✅", "❌"), ("🇫🇷", "🇩🇪"), ("☕", "🍵")]


@pytest.fixture()
def memory(home: Path) -> Iterator[tuple[LongTermMemory, SqliteStore]]:
    store = SqliteStore(home / "memlife.db")
    m = LongTermMemory(store, ledger=AccessLedger(home / "ledger"))  # the bundled MiniLM
    yield m, store
    m.close()
    store.close()


def test_the_shipped_embedder_cannot_tell_these_apart() -> None:
    """Why the restatement check must: the vectors of each pair are one vector."""
    emb = default_embedder()
    for a, b in PAIRS:
        va, vb = emb.embed([a, b])
        assert float(va @ vb) > 0.99, (a, b)


@pytest.mark.parametrize(("first", "second"), PAIRS)
def test_remember_keeps_two_different_symbol_facts(
    memory: tuple[LongTermMemory, SqliteStore], first: str, second: str
) -> None:
    """Must hold: the second fact is stored, the first is not refreshed by it."""
    m, store = memory
    assert m.remember("u1", NS, None, first).created
    got = m.remember("u1", NS, None, second)
    assert got.created and got.refreshed_duplicate_of is None
    assert sorted(r.content for r in store.page("u1", NS).records) == sorted([first, second])


def test_control_the_same_symbol_fact_is_refreshed(
    memory: tuple[LongTermMemory, SqliteStore],
) -> None:
    """Control: the same emoji again (trailing space stripped) is a duplicate, refreshed."""
    m, store = memory
    first = m.remember("u1", NS, None, "👍")
    again = m.remember("u1", NS, None, "👍 ")
    assert first.created and not again.created
    assert again.refreshed_duplicate_of == first.record_id
    assert [r.content for r in store.page("u1", NS).records] == ["👍"]


def test_control_a_worded_near_duplicate_is_still_refreshed(
    memory: tuple[LongTermMemory, SqliteStore],
) -> None:
    """Control: the fix leaves texts with words to the word rules ("Likes tea 👍" is
    refreshed by "likes tea 👍": the same words, another case)."""
    m, _ = memory
    first = m.remember("u1", NS, None, "Likes green tea 👍")
    again = m.remember("u1", NS, None, "likes green tea 👍")
    assert again.refreshed_duplicate_of == first.record_id


def _items(texts: list[str]) -> list[InferenceItem]:
    return [
        InferenceItem(f"m-{i}", t, float(i), norm_sha256(t), negates(t))
        for i, t in enumerate(texts)
    ]


def test_the_night_keeps_symbol_facts_as_statements_of_their_own() -> None:
    """The night's statement clustering, on the shipped embedder's vectors: each symbol
    fact leads its own statement (a statement's members are merged into one record)."""
    texts = [t for pair in PAIRS for t in pair]
    vecs = default_embedder().embed(texts)
    root = _statement_leaders(vecs, _items(texts), 0.9)
    assert root.tolist() == list(range(len(texts)))


def test_control_the_night_still_joins_a_restated_fact() -> None:
    texts = ["Likes green tea 👍", "likes green tea 👍", "👍"]
    vecs = default_embedder().embed(texts)
    assert _statement_leaders(vecs, _items(texts), 0.9).tolist()[:2] == [0, 0]
