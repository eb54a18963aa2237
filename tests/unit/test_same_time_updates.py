"""Records saved at the same instant are never each other's probable update.

LoCoMo observations are imported with created_at = their session's date: many records
share one time, and which of two counts as "newer" was only the id tie-break of the sort.
A reviewer's plain supersede then retired "Calvin had a car accident last Friday, but no
one was hurt." for "Calvin had to deal with insurance and repairs after the car accident."
Same-time statements carry no order: no POSSIBLE_UPDATE between them; a genuinely older
statement behind a same-time sibling is still found (group.closest_earlier).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from memlife.group import InferenceItem, closest_earlier, infer_subjects
from memlife.text import negates, norm_sha256

T0, T1 = 1_700_000_000.0, 1_700_600_000.0


def _item(rid: str, text: str, created: float) -> InferenceItem:
    return InferenceItem(rid, text, created, norm_sha256(text), negates(text))


def _unit(*rows: list[float]) -> np.ndarray:
    v = np.array(rows, dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_two_records_saved_at_the_same_instant_are_not_an_update() -> None:
    # cosine 0.8: one inferred subject (>= 0.5), two statements (< 0.92), above the
    # update floor (0.5); "now" is an update cue and "car" a shared content word
    items = [
        _item("a", "Calvin had a car accident last Friday, but no one was hurt.", T1),
        _item("b", "Calvin now deals with insurance and repairs after the car accident.", T1),
    ]
    vecs = _unit([1.0, 0.0], [0.8, 0.6])
    found = infer_subjects(items, vecs)
    assert found.subjects["a"] == found.subjects["b"]  # same subject: the pair was possible
    assert found.updates == {}
    # the same two a session apart are a probable update, in time order
    later = [items[0], _item("b", items[1].text, T1 + 1.0)]
    assert infer_subjects(later, vecs).updates == {"a": "b"}
    # ... and the id never decides the direction: the older one is the one updated
    swapped = [_item("z", items[0].text, T0), _item("b", items[1].text, T1)]
    assert infer_subjects(swapped, vecs).updates == {"z": "b"}


def test_an_older_record_behind_a_same_time_sibling_is_still_updated() -> None:
    # c (session 2) is closest to its sibling b (same session) but also close to a
    # (session 1): the sibling is skipped and a is c's closest strictly earlier statement
    items = [
        _item("a", "Melanie drives an old red car to work.", T0),
        _item("b", "Melanie keeps her car in a garage downtown.", T1),
        _item("c", "Melanie now drives a new electric car to work.", T1),
    ]
    deg = np.pi / 180
    vecs = _unit(
        [1.0, 0.0], [np.cos(58 * deg), np.sin(58 * deg)], [np.cos(32 * deg), np.sin(32 * deg)]
    )
    sims = vecs @ vecs.T
    assert 0.5 <= sims[2, 0] < sims[2, 1] < 0.92  # b is c's closest, a is above the floor
    found = infer_subjects(items, vecs)
    assert len(set(found.subjects.values())) == 1
    assert found.updates == {"a": "c"}  # formerly {"b": "c"}: b's id sorted before c's


def test_closest_earlier_without_times_keeps_the_row_order_rule() -> None:
    vecs = _unit([1.0, 0.0], [0.8, 0.6])
    root = np.array([0, 1])
    assert [(k, j) for k, j, _ in closest_earlier(vecs, root, 0.92, 0.5)] == [(1, 0)]
    assert [(k, j) for k, j, _ in closest_earlier(vecs, root, 0.92, 0.5, np.array([T0, T1]))] == [
        (1, 0)
    ]
    assert closest_earlier(vecs, root, 0.92, 0.5, np.array([T1, T1])) == []


_CUED = [
    "Sam now drives a car to work.",
    "Sam no longer drives a car to work.",
    "Sam drives a car to work.",
    "Sam switched to a bike for work.",
    "Sam gave up the car for work.",
    "Sam moved to a flat near work.",
    "Sam does not drive to work.",
]


@settings(max_examples=150, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.integers(0, 3),  # statement time: few values, many ties
            st.integers(0, len(_CUED) - 1),
            st.lists(st.floats(-1.0, 1.0, allow_nan=False), min_size=3, max_size=3),
        ),
        min_size=2,
        max_size=24,
    )
)
def test_pairs_only_go_from_strictly_older_to_strictly_newer(rows) -> None:
    base = np.array([3.0, 0.0, 0.0, 0.0], dtype=np.float32)  # one subject, mostly
    vecs = np.array([[*v, 0.0] for _, _, v in rows], dtype=np.float32) + base
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    items = [
        _item(f"r{n:02d}-{t}", _CUED[c] + f" ({n})", T0 + 86400.0 * t)
        for n, (t, c, _) in enumerate(rows)
    ]
    found = infer_subjects(items, vecs)
    created = {it.id: it.created for it in items}
    for older, newer in found.updates.items():
        assert created[older] < created[newer], (older, newer)


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(0, 40),
    seed=st.integers(0, 2**32 - 1),
)
def test_closest_earlier_with_times_is_the_strictly_earlier_row_rule(n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    vecs = rng.standard_normal((n, 6)).astype(np.float32) + 1.5
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True) if n else 1.0
    times = np.sort(rng.integers(0, 4, n)).astype(np.float64)
    root = np.array([int(rng.integers(0, k + 1)) if rng.random() < 0.3 else k for k in range(n)])
    got = closest_earlier(vecs, root, 0.95, 0.6, times)
    want = []
    sims = vecs[1:] @ vecs.T  # the same product closest_earlier takes (n < one block)
    for k in range(1, n):
        row = sims[k - 1, :k].copy()
        row[(root[:k] == root[k]) | (row >= 0.95) | (times[:k] >= times[k])] = -np.inf
        j = int(np.argmax(row))
        if row[j] >= 0.6:
            want.append((k, j))
    assert [(k, j) for k, j, _ in got] == want
    assert all(times[j] < times[k] for k, j, _ in got)
