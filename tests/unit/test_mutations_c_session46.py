"""Session 46 (audit 46j): mutation survivors in session 46's statement clustering and negation reading
(memlife/group.py) and the journal's supersede times (memlife/journal). Each test names the mutation it kills (file, function, change). The
functions are pure: real texts, real ``restates``; vectors are hand-made rows (the
embedder is not what is tested), as test_complexity_session46 does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

import memlife.group as group
from memlife.group import InferenceItem
from memlife.journal import Operation, OpKind, OpState, Outcome, SqliteJournal
from memlife.journal import supersede_times_via as via_for_record
from memlife.journal.sqlite import read_supersede_times
from memlife.text import negates, norm_sha256

A = "I drink tea every morning"
C = "Every morning I drink tea"  # restates A (another order), another normalised text


def _items(texts: list[str]) -> list[InferenceItem]:
    return [
        InferenceItem(f"m-{i}", t, float(i), norm_sha256(t), negates(t))
        for i, t in enumerate(texts)
    ]


def _leaders_then_c(others: list[str], weight: float) -> np.ndarray:
    """A, then ``others`` (each a leader: orthogonal rows), then C, whose row is closer to
    each of ``others`` (``weight``) than to A (1.0), and near all of them."""
    n = len(others) + 1
    vecs = np.eye(n + 1, dtype=np.float32)[:n]
    c = np.zeros(n + 1, dtype=np.float32)
    c[0], c[1:n] = 1.0, weight
    vecs = np.vstack([vecs, c / np.linalg.norm(c)])
    root = group._statement_leaders(vecs, _items([A, *others, C]), threshold=0.1)
    assert list(root[:n]) == list(range(n))  # A and the others each lead
    return root


def test_a_restatement_behind_a_closer_leader_still_joins_it() -> None:
    """The adversary saves a near statement that says other words ("coffee") between a fact
    and its restatement, so the restatement's closest leader is the wrong one. Kills
    memlife/group.py::_statement_leaders ``_TRIES = 8`` -> ``_TRIES = 1`` (only the
    closest is checked): C must still join A, its second closest."""
    root = _leaders_then_c(["I drink coffee every morning"], weight=1.1)
    assert root[-1] == 0


def test_the_closest_leaders_are_checked_first() -> None:
    """Eight leaders that say other words are near C, A is nearest. Kills
    ``sorted(cand, reverse=True)`` -> ``sorted(cand)``: the farthest eight would use up
    the tries before A is reached, and C would stay apart from what it restates."""
    drinks = "coffee juice milk water cocoa cider lemonade kombucha".split()
    root = _leaders_then_c([f"I drink {d} every morning" for d in drinks], weight=0.9)
    assert root[-1] == 0


def test_leaders_of_the_other_polarity_use_no_tries() -> None:
    """Eight negated leaders are nearer C than A is. A leader of the other polarity is
    never a candidate and costs no restatement check. Kills dropping ``items[j].negated
    != it.negated`` from the skip (each then costs a try) and counting a skipped leader
    as a try: C must still reach A."""
    drinks = "coffee juice milk water cocoa cider lemonade kombucha".split()
    root = _leaders_then_c([f"I never drink {d} every morning" for d in drinks], weight=1.1)
    assert root[-1] == 0


def test_leaders_with_other_specifics_use_no_tries() -> None:
    """Eight leaders with numbers C does not hold are nearer C than A is. Kills dropping
    ``spec_of(j) != spec_of(k)`` from the skip (each then costs a try): C must reach A."""
    root = _leaders_then_c([f"I drink tea every morning at {h} am" for h in range(1, 9)], 1.1)
    assert root[-1] == 0


def test_a_later_negation_in_its_own_clause_is_read() -> None:
    """Kills memlife/group.py::_negated_words ``if m.end() > read_to`` -> ``if read_to < 0``
    (only the first negation's clause read): the second clause denies coffee."""
    assert group._negated_words("I do not like tea, and I do not like coffee") >= {"coffee"}


def test_a_negations_subject_is_read_three_long_words_back() -> None:
    """Kills ``_HEAD_CHARS = 256`` -> ``16``: the three words before "not" span 26
    characters here, and each of them is denied."""
    words = group._negated_words("The grand wedding celebration was not happening")
    assert words >= {"wedding", "celebration"}


def test_a_later_to_does_not_make_a_negation_an_infinitive() -> None:
    """Kills ``_INFINITIVE.match(text, m.end())`` -> ``.search(...)``: a "to" further on
    ("next to the lake") is no "not to": the wedding is still denied."""
    assert "wedding" in group._negated_words("The wedding is not happening next to the lake")


T0 = datetime(2026, 3, 1, tzinfo=UTC)
OURS, THEIRS = ("u", "/users/u/facts"), ("u", "/users/u/notes")


def _twin_journal(tmp_path: Path, ours: int = 0, theirs: int = 9) -> SqliteJournal:
    """Record id "m-1" reused in two namespaces: ours superseded on day ``ours``, theirs
    on day ``theirs`` (each by its own replacement, "r-ours" / "r-theirs")."""
    j = SqliteJournal.at(tmp_path / f"journal-{ours}-{theirs}.db")
    for oid, (actor, ns), day in (("o-ours", OURS, ours), ("o-theirs", THEIRS, theirs)):
        j.plan([Operation(operation_id=oid, run_id="run-1", kind=OpKind.supersede,
                          actor_id=actor, namespace=ns, record_id="m-1", reasons=[],
                          policy_version="p", replacement_id=f"r-{oid[2:]}")])  # fmt: skip
        j.transition(oid, OpState.APPLIED, outcome=Outcome.superseded, at=T0 + timedelta(days=day))
    return j


def test_the_journal_walk_counts_only_the_records_own_scope(tmp_path: Path) -> None:
    """The DynamoDB path (``supersede_times_via``, here over a SQLite journal's
    ``for_records``): another namespace's later supersede of a reused id must not delay
    our record's retention. Kills memlife/journal/__init__.py::supersede_times_via dropping
    ``and (scopes is None or scopes.get(rid) == (o.actor_id, o.namespace))``."""
    j = _twin_journal(tmp_path)
    assert via_for_record(j, ["m-1"], {"m-1": OURS}) == {"m-1": T0}
    assert via_for_record(j, ["m-1"], {"m-1": THEIRS}) == {"m-1": T0 + timedelta(days=9)}


def test_a_replacement_is_not_superseded_by_its_sources_supersedes(tmp_path: Path) -> None:
    """``for_records`` also gives the operations naming a record as the replacement. Kills
    supersede_times_via dropping ``o.record_id == rid``: the replacement "r-ours" would
    count as superseded when its source was."""
    j = _twin_journal(tmp_path)
    assert via_for_record(j, ["r-ours"], {"r-ours": OURS}) == {}
    assert via_for_record(j, ["r-ours"]) == {}


def test_without_scopes_the_sql_reader_gives_the_latest_over_scopes(tmp_path: Path) -> None:
    """Unscoped, each scope's supersede is a row of its own: the latest must win,
    whichever row SQLite returns first. Kills memlife/journal/sqlite.py::
    read_supersede_times ``max(out.get(rid, when), when)`` -> ``min(...)``, ``when`` or
    ``out.setdefault(rid, when)`` (the scoped reads hold one row a record)."""
    for ours, theirs in ((0, 9), (9, 0)):  # the later in either scope
        j = _twin_journal(tmp_path, ours, theirs)
        got = read_supersede_times(j.connection, j.lock, ["m-1"])
        assert got == {"m-1": T0 + timedelta(days=9)} == via_for_record(j, ["m-1"])
        scoped = read_supersede_times(j.connection, j.lock, ["m-1"], {"m-1": OURS})
        assert scoped == {"m-1": T0 + timedelta(days=ours)}
