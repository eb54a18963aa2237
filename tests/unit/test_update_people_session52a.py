"""Audit 52a (session 52: scoring, grouping and the plan on real, unlabelled memories).

LoCoMo observations saved as an agent saves a conversation's memories: one namespace per
conversation (both speakers' facts side by side), semantic, agent_inferred, no subject, no
owner, created at the session's time; through the real CLI on the embedded SQLite store,
offline (extractive consolidator).

Finding: a POSSIBLE_UPDATE pair joined two people's facts. "Jolene spends time playing video
games with her partner ..." then "Deborah used to play video games ..." share words and an
update cue ("used to"), so the night asked whether Deborah's record "probably replaces"
Jolene's: a `supersede` answered by default retires Jolene's true fact, and with a model key
set the pair goes to the model as one group instead. On the ten conversations kept one
namespace each, 4 of 33 POSSIBLE_UPDATE items paired two people (Jolene/Deborah twice,
Joanna/Nate, Sam/Evan); with a namespace per speaker none did, and none changes there.

The observations are quoted from LoCoMo (CC BY-NC 4.0) for evaluation only.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from memlife.embed import default_embedder
from memlife.group import InferenceItem, infer_subjects
from memlife.text import negates, norm_sha256
from tests.unit.test_locomo_nights_session44 import NIGHT1, night, open_items, seed


def said(sample: str, rid: str, text: str, at: str) -> dict[str, Any]:
    """One observation kept in its conversation's one namespace."""
    return {"id": rid, "actor_id": sample, "namespace": f"/conversations/{sample}",
            "memory_type": "semantic", "content": text, "created_at": at,
            "source": "agent_inferred", "confidence": 0.8}  # fmt: skip


RETREAT = [
    said("conv-48", "conv-48-s14-jolene-004",
         "Jolene is interested in visiting a retreat like the one Deborah went to.",
         "2023-06-26T09:17:00Z"),
    said("conv-48", "conv-48-s27-deborah-000",
         "Deborah was curious to hear more about Jolene's reflections from the meditation "
         "retreat and how they changed her.", "2023-09-12T14:18:00Z"),
]  # fmt: skip

GAMES = [
    said("conv-48", "conv-48-s14-jolene-004",
         "Jolene is interested in visiting a retreat like the one Deborah went to.",
         "2023-06-26T09:17:00Z"),
    said("conv-48", "conv-48-s12-jolene-000",
         "Jolene spends time playing video games with her partner to relax after a long day.",
         "2023-04-09T16:30:00Z"),
    said("conv-48", "conv-48-s18-deborah-002",
         "Deborah mentions that mindfulness is a huge part of her life and offers to assist "
         "Jolene with her mindfulness journey.", "2023-08-16T14:58:00Z"),
    said("conv-48", "conv-48-s19-deborah-003",
         "Deborah used to play video games, finding it a good way to relax.",
         "2023-08-19T00:52:00Z"),
]  # fmt: skip

# one person's real update, in the same shared namespace beside another person's fact
SAM = [
    said("conv-49", "conv-49-s20-sam-000",
         "Sam used to love hiking but hasn't had the chance to do it recently.",
         "2023-12-17T18:48:00Z"),
    said("conv-49", "conv-49-s20-evan-001",
         "Evan is glad Sam wants to get back into hiking.", "2023-12-17T18:48:00Z"),
    said("conv-49", "conv-49-s22-sam-000",
         "Sam recently took friends on an epic hiking trip.", "2023-12-31T11:00:00Z"),
]  # fmt: skip


def _pairs() -> list[tuple[str, str | None, str]]:
    return sorted((i["record_id"], i["pair_id"], i["reason"]) for i in open_items())


def test_one_persons_fact_is_never_asked_as_the_update_of_anothers(home: Path) -> None:
    """Jolene's interest in a retreat and Deborah's curiosity about Jolene's retreat, kept in
    the conversation's one namespace: each names the other, neither replaces the other."""
    seed(home, RETREAT)
    night(NIGHT1)
    assert [p for p in _pairs() if p[2] == "POSSIBLE_UPDATE"] == []


def test_anothers_used_to_is_no_update_of_ones_habit(home: Path) -> None:
    """Deborah's "used to play video games" is no update of "Jolene spends time playing video
    games" (both are names: each one's other observation names the other mid-sentence)."""
    seed(home, GAMES)
    night(NIGHT1)
    asked = [p[:2] for p in _pairs() if p[2] == "POSSIBLE_UPDATE"]
    assert ("conv-48-s12-jolene-000", "conv-48-s19-deborah-003") not in asked, asked


def test_one_persons_real_update_is_still_asked_beside_another_person(home: Path) -> None:
    """Control: Sam's real update (session 44's pair) is still asked in the shared namespace,
    with Evan's observation naming Sam beside it."""
    seed(home, SAM)
    night(NIGHT1)
    assert ("conv-49-s20-sam-000", "conv-49-s22-sam-000", "POSSIBLE_UPDATE") in _pairs()


def _updates(texts: list[tuple[str, str]]) -> dict[str, str]:
    """infer_subjects' probable updates (older id -> newer id) over (id, text) rows a day
    apart, oldest first, with the real embedding model."""
    vecs = default_embedder().embed([t for _, t in texts])
    items = [InferenceItem(rid, t, 1.7e9 + 86400.0 * n, norm_sha256(t), negates(t))
             for n, (rid, t) in enumerate(texts)]  # fmt: skip
    return infer_subjects(items, vecs).updates


def test_a_relationship_and_unnamed_notes_are_still_asked() -> None:
    """Controls: texts opening with the same two people (either order) are one relationship,
    and an agent's notes about its user that open with no name ("Works for Bob ..." / "Now
    works for Alice ...") change whom they name as before: both pairs stay probable updates."""
    assert _updates(
        [
            ("r-1", "Caroline and Melanie are best friends."),
            ("r-2", "Melanie and Caroline are not friends anymore."),
        ]
    ) == {"r-1": "r-2"}
    assert _updates(
        [("n-1", "Works for Bob at the bakery."), ("n-2", "Now works for Alice at the bakery.")]
    ) == {"n-1": "n-2"}


def test_inference_keeps_the_pair_of_one_person_across_shuffles() -> None:
    """Control on the pure inference: the same shard in any input order gives the same
    updates (inference orders by time and id itself), and Sam's stays."""
    rows = [r for r in SAM]
    vecs = default_embedder().embed([r["content"] for r in rows])

    def items(order: list[int]) -> tuple[list[InferenceItem], np.ndarray]:
        from datetime import datetime

        its = [InferenceItem(rows[i]["id"], rows[i]["content"],
                             datetime.fromisoformat(rows[i]["created_at"]).timestamp(),
                             norm_sha256(rows[i]["content"]), negates(rows[i]["content"]))
               for i in order]  # fmt: skip
        return its, vecs[order]

    answers = set()
    for order in ([0, 1, 2], [2, 1, 0], [1, 2, 0]):
        found = infer_subjects(*items(order))
        answers.add(json.dumps(found.updates, sort_keys=True))
    assert answers == {json.dumps({"conv-49-s20-sam-000": "conv-49-s22-sam-000"})}
