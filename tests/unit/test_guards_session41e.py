"""Guards left untested by the forty-first audit e (session 41): the relative-clause and
list-item pairs of ``memlife/restate.py``, the swap words of grounding
(``memlife/consolidate/swap_words.py``), ``erase --subject K --inferred``
(``memlife/cli/erase.py``) and the skipped supersede of a removed replacement
(``memlife/apply/appliers/base.py::replacement_removed``). Tests marked
``xfail(strict=True)`` show a REAL BUG on the unmodified code (the audit's report)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memlife.apply import Tally
from memlife.apply.lifecycle import run_lifecycle
from memlife.consolidate.base import ConsolidationError
from memlife.consolidate.grounding import UNGROUNDED_CLAIM, check_grounding
from memlife.consolidate.swap_words import unsupported
from memlife.embed import MiniLMEmbedder
from memlife.erase import erase
from memlife.inferred import InferredSubjects
from memlife.journal import OpState
from memlife.model import Status
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke
from tests.support.restating import both, neither
from tests.unit.test_erase_inferred_hint import NS as ERASE_NS
from tests.unit.test_erase_inferred_hint import rec as erase_rec
from tests.unit.test_grounding import THRESHOLD, code, emb, group, result
from tests.unit.test_guards_session33 import (
    SqliteEnv,
    executor,
    rec,
    sqlite_env,
    supersede_op,
)

__all__ = ["emb", "sqlite_env"]  # fixtures


# -- 1. restate.py: the relative-clause pairs and the list items a determiner opens --------
@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Kids that love dogs fear cats.", "Kids that love cats fear dogs."),
        ("Dogs which chase cats hate mice.", "Dogs which chase mice hate cats."),
        ("Kids whose dogs love cats fear mice.", "Kids whose dogs love mice fear cats."),
    ],
)
def test_each_relative_word_restricts_a_subject(a: str, b: str) -> None:
    """Attacks ``_RELATIVE`` in ``memlife/restate.py``: "that" (the first pair), "which" and
    "whose" (the others) open a relative clause as "who" does; dropping one merges two
    statements whose objects trade across the verbs (a lost fact)."""
    assert neither(a, b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        # an owned item of three words: "his big dog" (the limit ``3 if own``)
        ("Tom and his big dog love mom", "Tom and his big mom love dog"),
        # an item "the" opens: "big dog" read after the filler (``2 if not own``, the
        # determiner before it, the ``len(c) - 2`` limit)
        ("Tom and the big dog love mom", "Tom and the big mom love dog"),
    ],
)
def test_every_word_of_a_determiners_item_stands_in_the_head_list(a: str, b: str) -> None:
    """Attacks ``memlife/restate.py::_item_end`` (``k + (3 if own else 2)``, the
    ``folded[c[k] - 1] in _DETERMINERS`` test) and ``_head_list``'s ``len(c) - 2`` limit:
    the item's last word traded with the clause's object is another statement."""
    assert neither(a, b)


def test_an_item_ends_before_the_next_item_of_its_list() -> None:
    """Attacks ``min(..., limit)`` in ``memlife/restate.py::_item_end``: without the limit an
    item run on past the clause's words raised IndexError; the pair stays apart."""
    assert neither("Jon and his friend and Tom met Gina.", "Jon and Gina and Tom met his friend.")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("Young kids who love dogs fear cats.", "Young kids who love cats fear dogs."),
        ("My kids who love dogs fear cats.", "My kids who love cats fear dogs."),
        ("Jon's kids who love dogs fear cats.", "Jon's kids who love cats fear dogs."),
        ("In 2020 kids who love dogs feared cats.", "In 2020 kids who love cats feared dogs."),
        ("Jon said kids who love dogs fear cats.", "Jon said kids who love cats fear dogs."),
    ],
)
def test_a_relative_clause_after_a_modified_subject_keeps_its_order(a: str, b: str) -> None:
    """Attacks the ``range(c[0] + 1, c[1] + 1)`` window of the relative-clause pairs in
    ``memlife/restate.py::_shape``: "young kids who love dogs" restricts its subject as
    "kids who love dogs" does (which the session-41 tests hold apart)."""
    assert neither(a, b)


def test_a_time_word_moved_in_a_relative_clause_statement_still_restates() -> None:
    """Attacks the relative-clause pairs in ``memlife/restate.py::_shape``: "often" moved
    is no swap ("Only a swap counts: a clause whose words merely move is read as
    before"); before session 41 the pair restated, as its list twin still does
    (test_restate_session41: "Jon and his old friend often met Gina")."""
    assert both("Kids who love dogs often fear cats.", "Kids who love dogs fear cats often.")


# -- 2. swap_words.py and its use in check_grounding --------------------------------------
def test_plurals_and_possessives_of_a_swap_word_have_its_value() -> None:
    """Attacks ``form in (w, w + "s")`` and ``_WORD = [a-z]+`` in
    ``memlife/consolidate/swap_words.py``: "brothers" for "sisters" and "dad's" for "mom's"
    are swaps (a plural or a possessive left without a value passes)."""
    assert unsupported("My brothers are doctors.", ["My sisters are doctors."]) == {"kin:brother"}
    assert unsupported("Jon's dad's car is red.", ["Jon's mom's car is red."]) == {"kin:father"}
    assert unsupported("Jon's Mom's car is red.", ["Jon's mother's car is red."]) == set()


def test_a_swap_refusal_names_no_word_of_the_summary(emb: MiniLMEmbedder) -> None:
    """Attacks the message of ``check_grounding``'s swap refusal: it counts, never quotes
    (error messages are logged and receipted: no content)."""
    with pytest.raises(ConsolidationError) as info:
        check_grounding(
            result("Gina's dad runs a bakery."), group("Gina's mom runs a bakery."), emb, THRESHOLD
        )
    assert info.value.code == UNGROUNDED_CLAIM
    text = str(info.value).lower()
    assert "kin, feeling, colour or compass word" in text
    assert not any(w in text for w in ("dad", "father", "mom", "bakery", "gina"))


@pytest.mark.parametrize(
    ("source", "summary"),
    [
        ("Melanie hates camping.", "Melanie likes camping."),
        ("Melanie dislikes camping.", "Melanie likes camping."),
        ("Melanie loves camping.", "Melanie is loathing camping."),
        ("Jon's love of jazz is old.", "Jon's hatred of jazz is old."),
        ("Caroline lives in the northeast.", "Caroline lives in the southwest."),
        ("Gina's stepmother runs a bakery.", "Gina's stepfather runs a bakery."),
        ("Her husbands were doctors.", "Her wives were doctors."),
    ],
)
def test_a_swap_the_word_list_misses_is_refused(
    emb: MiniLMEmbedder, source: str, summary: str
) -> None:
    """Attacks ``_VALUES`` in ``memlife/consolidate/swap_words.py``: each pair is a feeling,
    compass or kin word swapped (the summary says the opposite of its source), and each
    grounds today (cosine above the threshold, no specific, no value in the summary)."""
    assert code(result(summary), group(source), emb) == UNGROUNDED_CLAIM


# -- 3. cli/erase.py: erase --subject K --inferred ----------------------------------------
def _erase_store(home: Path, inferred: dict[str, str]) -> Path:
    db = home / "memlife.db"
    with SqliteStore(db) as store:
        store.put_many([erase_rec("m-1", "Carries an EpiPen."), erase_rec("m-2", "Runs on Sundays."),
                        erase_rec("m-3", "Allergic to peanuts.", subject="allergy")])  # fmt: skip
        InferredSubjects.for_store(store).put("u-1", ERASE_NS, inferred, "remember")
    return db


def test_the_preview_marks_only_inferred_records_as_inferred(home: Path) -> None:
    """Attacks the given-subject filter of ``memlife/cli/erase.py::_inferred_only`` (and its
    ``strip().lower()``): a record given the subject ("allergy", asked as " Allergy") is
    erased as asked, never marked "inferred subject"; the one memlife inferred is."""
    db = _erase_store(home, {"m-1": "allergy", "m-2": "running"})
    code_, out, err = invoke("erase", "--store", f"sqlite:///{db}", "--actor", "u-1",
                             "--subject", " Allergy", "--inferred", "--json")  # fmt: skip
    assert code_ == 0, err
    detail = json.loads(out)["detail"]
    assert detail == {"m-1": "ERASURE_REQUEST; inferred subject", "m-3": "ERASURE_REQUEST"}


def test_inferred_keeps_the_ids_named_beside_it(home: Path) -> None:
    """Attacks ``ids = [*(ids or ()), *guessed]`` in ``memlife/cli/erase.py``: an --id named
    with --inferred is erased too (the inferred ids are added, never put in its place)."""
    db = _erase_store(home, {"m-1": "allergy"})
    code_, _, err = invoke("erase", "--store", f"sqlite:///{db}", "--actor", "u-1",
                           "--subject", "allergy", "--inferred", "--id", "m-2", "--yes")  # fmt: skip
    assert code_ == 0, err
    with SqliteStore(db) as store:
        assert [store.get(i) for i in ("m-1", "m-2", "m-3")] == [None, None, None]


def test_an_inferred_subject_is_matched_whatever_its_case(home: Path) -> None:
    """Attacks ``s.strip().lower() == want`` in ``memlife/holds.py::subject_ids`` (what
    --inferred reads): an inferred " Allergy " is the subject "allergy"."""
    db = _erase_store(home, {"m-1": " Allergy ", "m-2": "running"})
    code_, _, err = invoke("erase", "--store", f"sqlite:///{db}", "--actor", "u-1",
                           "--subject", "allergy", "--inferred", "--yes")  # fmt: skip
    assert code_ == 0, err
    with SqliteStore(db) as store:
        assert store.get("m-1") is None and store.get("m-2") is not None


# -- 4. appliers/status.py: a supersede whose replacement is missing ----------------------
def test_a_replacement_never_written_still_fails_the_supersede(sqlite_env: SqliteEnv) -> None:
    """Attacks ``repl is None and replacement_removed(ex, o)`` in
    ``memlife/apply/appliers/status.py::set_status``: a replacement nobody removed (never
    written) is REPLACEMENT_MISSING, not a quiet skip."""
    store, journal, sink = sqlite_env
    a = rec("m-a")
    store.put_many([a])
    ex = executor(store, journal, sink)
    (done,) = run_lifecycle(ex, [supersede_op(ex, a, by="m-r")], Tally())
    assert (done.state, done.last_error) == (OpState.FAILED, "REPLACEMENT_MISSING")
    assert store.get("m-a") == a


def test_a_replacement_erased_before_the_supersede_was_planned_fails_it(
    sqlite_env: SqliteEnv,
) -> None:
    """Attacks ``other.updated_at >= op.created_at`` in
    ``memlife/apply/appliers/base.py::replacement_removed``: an erasure done before the
    supersede was planned says the plan named a record already gone (a failure), not one
    a user erased between a crash and its rerun."""
    store, journal, sink = sqlite_env
    a = rec("m-a")
    store.put_many([a, rec("m-r", "Likes green tea.")])
    erase(store, "u-1", ids=["m-r"])
    assert store.get("m-r") is None
    ex = executor(store, journal, sink)
    (done,) = run_lifecycle(ex, [supersede_op(ex, a, by="m-r")], Tally())
    assert (done.state, done.last_error) == (OpState.FAILED, "REPLACEMENT_MISSING")
    assert store.get("m-a") == a


def test_another_actors_erasure_of_the_replacements_id_fails_the_supersede(
    sqlite_env: SqliteEnv,
) -> None:
    """Attacks the ``(actor_id, namespace)`` scope in
    ``memlife/apply/appliers/base.py::replacement_removed``: ids are reused across actors;
    another actor's record erased under the replacement's id says nothing of ours."""
    store, journal, sink = sqlite_env
    a = rec("m-a")
    store.put_many([a])
    ex = executor(store, journal, sink)
    op = supersede_op(ex, a, by="m-r")
    store.put_many([rec("m-r", "Walks daily.", actor_id="u-2", namespace="/users/u-2/facts")])
    erase(store, "u-2", ids=["m-r"])
    assert store.get("m-r") is None
    (done,) = run_lifecycle(ex, [op], Tally())
    assert (done.state, done.last_error) == (OpState.FAILED, "REPLACEMENT_MISSING")
    got = store.get("m-a")
    assert got is not None and got.status is Status.active
