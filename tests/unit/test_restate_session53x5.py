"""Audit 53x5 (session 53: what an offline merge may write): "only" and moved negations.

`restates` decides which records a night with no subject merges (the extractive
consolidator then keeps one text verbatim and supersedes the other). Three word moves
that change the fact still read as one statement:

- an "only" that opens its clause restricts the subject after it: "Only she knows the
  password." (nobody else knows it) restated "She knows only the password." (she knows
  nothing else), "Only my sister eats meat." / "My sister eats only meat." (cosine
  0.94-0.97). Audit 51x5's rule tagged "only" by the link word after it, and a subject is
  none, so both forms got no mark;
- an "only" that ends its phrase before "and" looked past the "and" (filler to the scan)
  at the next clause's word: "eats only meat on Sundays and fish on Fridays" restated
  "eats meat on Sundays only and fish on Fridays"; one after a link ("in only two
  weeks") was marked by the word after it, not by the link it restricts;
- in another language a negation moved from one clause into the next is one word moved,
  which `restate_swap` read as innocent: "Isst kein Fleisch und trinkt Wein." restated
  "Isst Fleisch und trinkt kein Wein." (cosine 0.995), as did Italian, Portuguese and
  Russian (Spanish "no" is English's too: read already).

Each pair, with no subject, was merged by a real night into the newer text and the
older fact superseded: told by no active record.

Real components: the embedded SQLite store, the bundled MiniLM, the extractive
consolidator (no key), one nightly apply run through ``run_local``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlife.model import MemoryRecord, Source, Status
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.support.restating import both, neither

DAY1 = datetime(2026, 4, 6, 7, tzinfo=UTC)
NIGHT = DAY1 + timedelta(days=20)
NS = "/users/u-7/notes"  # no subject, deletion not enforced: no evaluation set needed

SUBJECT_ONLY = [
    ("Only she knows the password.", "She knows only the password."),
    ("Only my sister eats meat.", "My sister eats only meat."),
    ("Only I have a key to the safe.", "I only have a key to the safe."),
    ("Only the kids eat meat.", "The kids eat only meat."),
]
PHRASE_ONLY = [
    ("Alice eats only meat on Sundays and fish on Fridays.",
     "Alice eats meat on Sundays only and fish on Fridays."),
    ("Learned only French in two weeks.", "Learned French in only two weeks."),
]  # fmt: skip
MOVED_NEGATION = [
    ("Isst kein Fleisch und trinkt Wein.", "Isst Fleisch und trinkt kein Wein."),
    ("Lei non mangia carne e beve vino.", "Lei mangia carne e non beve vino."),
    ("Ela não come carne e bebe vinho.", "Ela come carne e não bebe vinho."),
    ("Он не ест мясо и пьёт вино.", "Он ест мясо и не пьёт вино."),
]
# the same fact either way: they restated before and must still
SAME = [
    ("Only on Sundays she eats meat.", "She eats meat only on Sundays."),
    ("I only drink green tea.", "I drink only green tea."),
    ("At night only, takes aspirin.", "Only at night, takes aspirin."),
    ("Every morning she drinks coffee and tea.", "She drinks coffee and tea every morning."),
    ("Caroline hates coffee and likes tea.", "Caroline likes tea and hates coffee."),
    ("Melanie and I went camping.", "I and Melanie went camping."),
    ("Ella bebe café y té cada mañana.", "Cada mañana ella bebe café y té."),
    ("Il aime le thé et le café.", "Il aime le café et le thé."),
]


def _night(home: Path, older: str, newer: str) -> list[str]:
    store = SqliteStore(home / "memlife.db")
    try:
        store.put_many([
            MemoryRecord(id=f"m-{i}", actor_id="u-7", namespace=NS, memory_type="semantic", content=text,
                         source=Source.user_stated, created_at=DAY1 + timedelta(days=5 * i))
            for i, text in enumerate((older, newer))
        ])  # fmt: skip
    finally:
        store.close()
    assert run_local(RunConfig(dry_run=False, now=NIGHT)).status == "success"
    store = SqliteStore(home / "memlife.db")
    try:
        return sorted(r.content for r in store.iter_all() if r.status is Status.active)
    finally:
        store.close()


@pytest.mark.parametrize(("a", "b"), SUBJECT_ONLY)
def test_only_opening_its_clause_restricts_the_subject(a: str, b: str) -> None:
    assert neither(a, b)


@pytest.mark.parametrize(("a", "b"), PHRASE_ONLY)
def test_only_keeps_its_own_phrase(a: str, b: str) -> None:
    assert neither(a, b)


@pytest.mark.parametrize(("a", "b"), MOVED_NEGATION)
def test_a_negation_moved_into_the_next_clause_is_another_statement(a: str, b: str) -> None:
    assert neither(a, b)


@pytest.mark.parametrize(("a", "b"), SAME)
def test_control_the_same_fact_with_a_word_moved_still_restates(a: str, b: str) -> None:
    assert both(a, b)


_WHO = st.sampled_from(["she", "he", "we", "they", "I", "my sister", "the kids", "our team"])
_DOES = st.sampled_from([("knows", "the code"), ("eats", "meat"), ("has", "a key"),
                         ("speaks", "French"), ("drinks", "coffee"), ("reads", "the mail")])  # fmt: skip


@settings(max_examples=40, deadline=None, derandomize=True)
@given(who=_WHO, does=_DOES)
def test_property_only_before_the_subject_is_not_only_before_the_object(
    who: str, does: tuple[str, str]
) -> None:
    verb, obj = does
    subject = who if who == "I" else who.capitalize()
    assert neither(f"Only {who} {verb} {obj}.", f"{subject} {verb} only {obj}.")


_NEG = st.sampled_from([("kein", "und"), ("nicht", "und"), ("no", "y"), ("не", "и")])
_ACTS = st.sampled_from([("isst", "Fleisch", "trinkt", "Wein"), ("liest", "Bücher", "hört", "Musik"),
                         ("come", "carne", "bebe", "vino"), ("ест", "мясо", "пьёт", "вино")])  # fmt: skip


@settings(max_examples=40, deadline=None, derandomize=True)
@given(neg=_NEG, acts=_ACTS)
def test_property_a_negation_moved_past_a_joiner_is_another_statement(
    neg: tuple[str, str], acts: tuple[str, str, str, str]
) -> None:
    no, joiner = neg
    v1, o1, v2, o2 = acts
    assert neither(
        f"Sie {v1} {no} {o1} {joiner} {v2} {o2}.", f"Sie {v1} {o1} {joiner} {v2} {no} {o2}."
    )


@pytest.mark.parametrize(("older", "newer"), [SUBJECT_ONLY[0], MOVED_NEGATION[0]])
def test_a_night_keeps_both_facts(offline_home: Path, older: str, newer: str) -> None:
    assert _night(offline_home, older, newer) == sorted([older, newer])


def test_control_a_night_still_merges_only_said_in_another_place(offline_home: Path) -> None:
    older, newer = SAME[0]
    assert _night(offline_home, older, newer) == [newer]
