"""Session 46 (audit 46k): the restatement check's cap (``group._TRIES``, audit 46h) must still join a
row to its closest restated leader, as ``max()`` chose before the cap."""

from __future__ import annotations

import math

import numpy as np

from memlife.group import InferenceItem, _statement_leaders
from memlife.text import negates, norm_sha256


def _items(texts: list[str]) -> list[InferenceItem]:
    return [
        InferenceItem(f"m-{i}", t, float(i), norm_sha256(t), negates(t))
        for i, t in enumerate(texts)
    ]


def _unit(degrees: float) -> list[float]:
    return [math.cos(math.radians(degrees)), math.sin(math.radians(degrees))]


def test_a_restatement_joins_its_closest_leader_not_the_first_in_reverse_order() -> None:
    """Two leaders 60 degrees apart (below the 0.8 merge cosine of each other) that the
    third statement both restates; it lies 25 degrees from the second and 35 from the
    first. What must hold: it joins the closest (the second), whatever order the capped
    loop walks its candidates in."""
    texts = [
        "Drinks green tea every morning.",
        "Green tea every morning, drinks.",
        "Every morning drinks green tea.",
    ]
    vecs = np.array([_unit(0), _unit(60), _unit(35)], dtype=np.float32)
    root = _statement_leaders(vecs, _items(texts), 0.8)
    assert root.tolist() == [0, 1, 1]
