"""What a model's merge may leave out (session 29 review, a hostile model over the Messages
API): a "duplicate" that keeps the older, shorter record's words was accepted where the
newer said more ("Alice has a dog called Rex that bites strangers." -> "Alice has a dog
called Rex.", 0.9 apart: read as restated), and a record the planner labelled
contradicted was retired unchecked whatever the model answered ("Alice is severely
allergic to peanuts and carries an EpiPen." under a duplicate "Alice is allergic to
peanuts."). Both are DROPPED_FACT now; rewordings and faithful merges still pass."""

from __future__ import annotations

import pytest

from memlife.consolidate.coverage import DROPPED_FACT
from memlife.embed import MiniLMEmbedder, default_embedder
from tests.unit.test_coverage import check
from tests.unit.test_grounding import group


@pytest.fixture(scope="module")
def emb() -> MiniLMEmbedder:
    return default_embedder()


CUT_SHORT = [
    ("Alice has a dog called Rex.", "Alice has a dog called Rex that bites strangers."),
    ("Alice lives in Leeds.", "Alice lives in Leeds with her partner."),
    ("Alice takes metformin every evening.", "Alice takes metformin every evening with dinner."),
    ("Alice prefers aisle seats.", "Alice prefers aisle seats on long flights."),
    ("Alice drinks black coffee every morning.", "Alice drinks black coffee every morning at home."),
]  # fmt: skip


@pytest.mark.parametrize(("older", "newer"), CUT_SHORT)
def test_a_duplicate_that_cuts_the_newer_record_short_drops_a_fact(
    emb: MiniLMEmbedder,
    older: str,
    newer: str,
) -> None:
    assert check(older, group(older, newer), emb) == DROPPED_FACT
    assert check(newer, group(older, newer), emb) is None  # the longer one says both


def test_a_planner_label_alone_retires_nothing(emb: MiniLMEmbedder) -> None:
    severe = "Alice is severely allergic to peanuts and carries an EpiPen."
    plain = "Alice is allergic to peanuts."
    labelled = group(severe, plain, superseded=(0,))
    assert check(plain, labelled, emb) == DROPPED_FACT
    assert check(plain, labelled, emb, relation="update", outdated_ids=["s-0"]) is None
    assert check(plain, labelled, emb, dropped_claims=[severe]) is None


@pytest.mark.parametrize(
    ("sources", "summary"),
    [
        (("Recently, Alice adopted a cat named Miso.", "Alice adopted a cat named Miso."),
         "Alice adopted a cat named Miso."),
        (("Alice is allergic to peanuts.", "Alice has a peanut allergy."),
         "Alice has a peanut allergy."),
        (("Alice started working at the bakery in March.",
          "Since March, Alice has worked at the bakery."),
         "Since March, Alice has worked at the bakery."),
    ],
)  # fmt: skip
def test_rewordings_still_restate(emb: MiniLMEmbedder, sources, summary) -> None:
    assert check(summary, group(*sources), emb) is None


@pytest.mark.parametrize(
    ("sources", "summary"),
    [
        (("Caroline mentioned that she loves hiking.", "Caroline loves hiking."), "Caroline loves hiking."),
        (("Alice really loves hiking.", "Alice loves hiking."), "Alice loves hiking."),
        (("Alice works as a software engineer.", "Alice is a software engineer."), "Alice is a software engineer."),
    ],
)  # fmt: skip
def test_who_said_it_and_how_strongly_is_no_fact(emb: MiniLMEmbedder, sources, summary) -> None:
    assert check(summary, group(*sources), emb) is None


@pytest.mark.parametrize(
    "summary", ["Alice has a lovely dog called Rex.", "Alice owns a dog called Rex."]
)
def test_a_word_added_does_not_hide_two_dropped(emb: MiniLMEmbedder, summary: str) -> None:
    sources = ("Alice has a dog called Rex.", "Alice has a dog called Rex that bites strangers.")
    assert check(summary, group(*sources), emb) == DROPPED_FACT
