"""Audit 43a (session 43): the lookalike check after session 42e (``consolidate/lookalikes.py``): a claim
word that is a "form" of one source word passes whatever else the sources say."""

from __future__ import annotations

import pytest

from memlife.consolidate.lookalikes import lookalikes
from memlife.embed import MiniLMEmbedder
from tests.unit.test_grounding import code, emb, group, result

__all__ = ["emb"]  # the module-scoped embedder fixture


@pytest.mark.parametrize("other", ["psychosis", "psychotic episodes"])
def test_the_checks_own_swap_is_refused_beside_a_word_of_its_opening(
    emb: MiniLMEmbedder, other: str
) -> None:
    """The adversary (a summariser misreading) writes "psychologist" for the source's
    "psychiatrist", the swap the check exists for, in a group whose records also say
    "psychosis". "psychologist" is no form of "psychosis" (stems "psycholog" / "psychosi"
    merely share "psycho"), yet since 42e a "form" of any source word passes: the swap
    grounds. Must hold: refused as it is without the other word (UNGROUNDED_CLAIM)."""
    sources = ("Alice sees a psychiatrist every month.", f"Alice is treated for {other}.")
    summary = f"Alice sees a psychologist every month; Alice is treated for {other}."
    assert lookalikes("Alice sees a psychologist every month.", sources[:1]) == {"psychologist"}
    assert lookalikes(summary, sources) == {"psychologist"}
    assert code(result(summary, ids=("s-0", "s-1")), group(*sources), emb) == "UNGROUNDED_CLAIM"


def test_a_form_sharing_most_letters_still_passes_beside_a_lookalike() -> None:
    """Control (the 42e case, kept by the fix): "experimentation" shares ten letters with the
    source's "experimenting" and passes although "experienced" is there too."""
    sources = ["Joanna is experimenting with desserts.", "Nate experienced a letdown."]
    assert (
        lookalikes("Joanna enjoys experimentation; Nate experienced a letdown.", sources) == set()
    )
