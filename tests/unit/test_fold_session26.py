"""Session 26: the statement key folded away signs that carry the fact where they follow a
letter or stand alone ('A1C <7%' / '>7%', 'systolic ≤ 120' / '≥ 120', 'C++' / 'C#' / 'C',
blood type 'A+' / 'A-'): `remember` dropped the new fact as an exact duplicate of the old
(refreshing the old record) and the night merged the two. Store version 4 makes them words
of the statement; ordinary punctuation and hyphenated words fold as before. Each test but
the counter-checks failed before the fix."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memlife.ledger import AccessLedger
from memlife.model import MemoryRecord, parse_record_line
from memlife.online.index import norm_key
from memlife.online.memory import LongTermMemory
from memlife.restate import restates
from memlife.stores.sqlite import STORE_VERSION, SqliteStore, tombstone_norms
from memlife.text import norm_sha256, normalise
from memlife.tombstones import add as add_tombstones
from memlife.tombstones import insert_new

NS = "/users/u1/facts"

# the reproduction's pairs (scratch h1 f1 and f6), then more of the same kind
DIFFER = [
    (
        "Glucose target: reading must stay <180 mg/dL",
        "Glucose target: reading must stay >180 mg/dL",
    ),
    ("A1C must stay <7%", "A1C must stay >7%"),
    ("Blood pressure goal: systolic \u2264 120", "Blood pressure goal: systolic \u2265 120"),
    ("Writes the backend in C++", "Writes the backend in C"),
    ("Writes the backend in C#", "Writes the backend in C"),
    ("Writes the backend in C#", "Writes the backend in C++"),
    ("Her blood type is A+", "Her blood type is A-"),
    ("Blood type: O+", "Blood type: O-"),
    ("Blood type: O-", "Blood type: O"),
    ("Blood type: AB+.", "Blood type: AB."),
    ("Got an A+ in chemistry.", "Got an A in chemistry."),
    ("Tested HIV- in May.", "Tested HIV+ in May."),
    ("A1C must stay <=7%", "A1C must stay <7%"),
    ("A1C must stay >=7%", "A1C must stay >7%"),
    ("Dose must stay < 5 mg", "Dose must stay 5 mg"),
    ("The ratio x != 2", "The ratio x = 2"),
    ("The ratio x \u2260 2", "The ratio x = 2"),
    ("Only serves guests 18+", "Only serves guests 18"),
    ("Plays the C\u266f major scale", "Plays the C major scale"),
    ("Tolerance \u00b15 mm", "Tolerance 5 mm"),
]
# the same statement: one key (symbols as their words, compatibility forms, case/spacing)
SAME = [
    ("A1C must stay <7%", "a1c MUST stay < 7 %"),
    ("A1C must stay \uff1c7%", "A1C must stay <7%"),  # fullwidth '<'
    ("Systolic \u2264 120", "systolic <= 120"),
    ("Systolic \u2265 120", "Systolic >= 120"),
    ("Plays the C\u266f major scale", "plays the C# major scale"),
    ("Writes the backend in C++", "writes the backend in c++."),
    ("Her blood type is A+", "her blood type is A+!"),
    ("Blood type: O-", "blood type O-."),
]
# ordinary punctuation and hyphenated words fold as before (counter-check: passes before)
UNCHANGED = [
    ("A well-known cafe", "a well known cafe"),
    ("Prefers e-mail to phone calls.", "prefers e mail to phone calls"),
    ("- buy milk", "buy milk"),
    ("Had COVID-19 in 2021.", "had covid 19 in 2021"),
    ("Drinks tea -- never coffee.", "drinks tea never coffee"),
    ("Drinks tea - never coffee.", "drinks tea never coffee"),
    ("Moved Paris -> Berlin", "moved paris \u2192 berlin"),  # an arrow: its direction
    ("Ranked #1 in the league", "ranked 1 in the league"),
    ("Loves #travel photos", "loves travel photos"),
    ("Is vegetarian.", "is  VEGETARIAN"),
    ("On 2023-05-01.", "on 2023 05 01"),
]


# review 2: symbols that carry the fact, still folded away (failed before the fix)
DIFFER_SYMBOLS = [
    ("Passport renewed: \u2713", "Passport renewed: \u2717"),  # check mark / ballot x
    ("Penicillin allergy: \U0001f44d", "Penicillin allergy: \U0001f44e"),  # thumbs up/down
    ("Status \u2705 approved", "Status \u274c approved"),
    ("Allergy test \u2713", "Allergy test"),
    ("Rating: \u2605\u2605\u2605\u2605\u2605", "Rating: \u2605"),
    ("Account balance is $50", "Account balance is -$50"),
    ("Account balance is \u20ac50", "Account balance is \u2212\u20ac50"),
    ("Commute: Paris -> Berlin", "Commute: Paris <- Berlin"),
    ("Commute: Paris -> Berlin", "Commute: Paris Berlin"),
    ("Commute: Paris \u2192 Berlin", "Commute: Paris \u2190 Berlin"),
    ("Commute: Paris <-> Berlin", "Commute: Paris -> Berlin"),
    ("Age <- 18", "Age 18"),
]
# review 2: the same statement (failed before the fix: today's change split them)
SAME_MARKUP = [
    ("+ Likes tea", "Likes tea"),
    ("+ Likes tea", "- Likes tea"),
    ("  + Likes tea\n  + Likes jazz", "Likes tea\nLikes jazz"),
    ("> Likes jazz", "Likes jazz"),
    ("Likes tea + coffee", "Likes tea & coffee"),
    ("Likes tea & coffee", "likes tea and coffee"),
    ("Issue#42 fixed", "Issue #42 fixed"),
    ("Pre- and post-op care needed", "Pre and post-op care needed"),
    ("Likes tea- or coffee-flavoured cake", "Likes tea or coffee flavoured cake"),
    ("Commute: Paris -> Berlin", "commute paris \u2192 berlin"),
    ("Commute: Paris => Berlin", "Commute: Paris -> Berlin"),
    ("Passport renewed: \u2713\ufe0f", "passport renewed \u2713"),  # a variation selector
    ("Thumbs: \U0001f44d\U0001f3fd", "Thumbs: \U0001f44d"),  # a skin tone
    ("Likes \u2764\ufe0f cats", "likes \u2764 cats"),
]
# counter-checks that hold before and after: the sign stays a word where it says something
STILL_DIFFER = [
    ("Knows C#", "Knows C"),
    ("Blood type: O-", "Blood type: O"),
    ("Tested HIV- in May", "Tested HIV in May"),
    ("Only guests 18+", "Only guests 18"),
    ("Temperature -5 C", "Temperature 5 C"),
]


@pytest.mark.parametrize(("a", "b"), DIFFER_SYMBOLS + STILL_DIFFER)
def test_a_symbol_arrow_or_signed_currency_is_part_of_the_statement(a: str, b: str) -> None:
    assert norm_sha256(a) != norm_sha256(b)
    assert norm_key(a) != norm_key(b)
    assert not restates(a, b) and not restates(b, a)


@pytest.mark.parametrize(("a", "b"), SAME_MARKUP)
def test_markup_and_the_same_symbol_written_another_way_is_one_statement(a: str, b: str) -> None:
    assert norm_sha256(a) == norm_sha256(b)
    assert normalise(normalise(a)) == normalise(a)


def test_a_text_of_symbols_alone_is_keyed_by_its_exact_content() -> None:
    """Counter-check: '\U0001f44d' alone still folds to nothing (its exact hash keys it)."""
    assert normalise("\U0001f44d") == ""
    assert norm_sha256("\U0001f44d") == hashlib.sha256("\U0001f44d".encode()).hexdigest()


@pytest.mark.parametrize(("a", "b"), DIFFER)
def test_a_sign_after_a_letter_or_standing_alone_is_part_of_the_statement(a: str, b: str) -> None:
    assert norm_sha256(a) != norm_sha256(b)
    assert norm_key(a) != norm_key(b)  # remember's exact-duplicate key
    assert not restates(a, b) and not restates(b, a)  # nor a near-duplicate restatement


@pytest.mark.parametrize(("a", "b"), SAME)
def test_the_same_sign_in_another_form_or_case_is_one_statement(a: str, b: str) -> None:
    assert norm_sha256(a) == norm_sha256(b)
    assert restates(a, b) and restates(b, a)


@pytest.mark.parametrize(("a", "b"), UNCHANGED)
def test_ordinary_punctuation_and_hyphenated_words_fold_as_before(a: str, b: str) -> None:
    assert norm_sha256(a) == norm_sha256(b)


_WORDS = st.lists(st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
                          min_size=1, max_size=8), min_size=1, max_size=4).map(" ".join)  # fmt: skip
# a sign right after a letter, or standing alone, with the text going on after a space
_SIGNS = ["+", "++", "-", "#", "<", ">", "<=", ">=", "!=", "\u2264", "\u2265", "\u2260", "\u00b1"]
_SPACES = st.sampled_from([" ", "  ", "\t", " \n "])


@settings(max_examples=300, deadline=None)
@given(
    _WORDS,
    st.sampled_from(_SIGNS),
    st.sampled_from(_SIGNS + [""]),
    st.booleans(),
    st.sampled_from(["", " and more", ", said twice.", "."]),
)
def test_texts_differing_only_in_one_sign_never_share_a_key(
    head: str, sign: str, other: str, alone: bool, tail: str
) -> None:
    if other == sign or {sign, other} in ({"<=", "\u2264"}, {">=", "\u2265"}, {"!=", "\u2260"}):
        return  # the same sign, written two ways
    if alone and ({sign, other} & {"-", "#"}):
        return  # standing alone, '-' is a bullet or a dash and '#' a heading: punctuation
    if sign == "-" and not other and tail.startswith(" and"):
        return  # 'pre- and post-op': a suspended hyphen, punctuation
    gap = " " if alone else ""
    a = f"{head}{gap}{sign}{tail}"
    b = f"{head}{gap}{other}{tail}" if other else f"{head}{tail}"
    assert norm_sha256(a) != norm_sha256(b), (a, b)


@settings(max_examples=300, deadline=None)
@given(_WORDS, st.sampled_from(_SIGNS), _WORDS, _SPACES, st.booleans())
def test_a_text_and_its_case_or_spacing_variant_keep_one_key(
    head: str, sign: str, rest: str, space: str, upper: bool
) -> None:
    text = f"{head}{sign} {rest}"
    variant = f"{space}{head.upper() if upper else head.lower()}{sign}{space}{rest}{space}"
    assert norm_sha256(text) == norm_sha256(variant)
    assert normalise(normalise(text)) == normalise(text)  # a fold folds to itself


# -- remember: the new fact is kept, an ordinary duplicate still refreshes -----------------
@pytest.fixture()
def store(home: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(home / "memlife.db")
    yield s
    s.close()


@pytest.fixture()
def mem(store: SqliteStore, home: Path) -> Iterator[LongTermMemory]:
    m = LongTermMemory(store, ledger=AccessLedger(home / "ledger"))
    yield m
    m.close()


def test_remember_keeps_a_fact_that_differs_only_in_a_sign(
    mem: LongTermMemory, store: SqliteStore
) -> None:
    for i, (old, new) in enumerate(DIFFER[:8]):
        ns = f"/users/u1/facts{i}"
        first = mem.remember("u1", ns, None, old)
        second = mem.remember("u1", ns, None, new)
        assert second.created and second.refreshed_duplicate_of is None, (old, new)
        assert sorted(r.content for r in store.page("u1", ns).records) == sorted([old, new])
        assert store.get(first.record_id).content == old


def test_remember_still_refreshes_an_ordinary_duplicate(
    mem: LongTermMemory, store: SqliteStore
) -> None:
    """Counter-check: a case/spacing/punctuation variant is the same fact, signs included."""
    for i, (old, again) in enumerate([*SAME[:2], *SAME[4:], *UNCHANGED[:3]]):
        ns = f"/users/u1/same{i}"
        first = mem.remember("u1", ns, None, old)
        second = mem.remember("u1", ns, None, again)
        assert not second.created and second.refreshed_duplicate_of == first.record_id, (old, again)
        assert [r.content for r in store.page("u1", ns).records] == [old]


# -- the store: version 4 and its refold ----------------------------------------------------
def rec(rid: str, content: str) -> MemoryRecord:
    line = {"id": rid, "actor_id": "u1", "namespace": NS, "memory_type": "semantic",
            "content": content, "created_at": "2026-01-02T10:00:00Z"}  # fmt: skip
    return parse_record_line(json.dumps(line))


def _sha(folded: str) -> str:
    return hashlib.sha256(folded.encode()).hexdigest()


def _keys(path: Path) -> dict[str, str]:
    con = sqlite3.connect(path)
    try:
        return dict(con.execute("SELECT id, norm_sha256 FROM records").fetchall())
    finally:
        con.close()


def _version(path: Path) -> int:
    con = sqlite3.connect(path)
    try:
        return int(con.execute("PRAGMA user_version").fetchone()[0])
    finally:
        con.close()


def test_reopening_a_version_3_store_recomputes_the_rows_a_sign_can_change(
    tmp_path: Path,
) -> None:
    """The rows holding '<', '>', '+', '#', '!=' or a '-' after a letter (or non-ASCII
    content) get their key recomputed; other ASCII rows are not touched (a sentinel key
    stays)."""
    path = tmp_path / "m.db"
    v3 = {  # content: what the version-3 fold made of it
        "m-lt": ("A1C must stay <7%", "a1c must stay 7 percent"),
        "m-le": ("Systolic \u2264 120", "systolic 120"),
        "m-cpp": ("Writes the backend in C++", "writes the backend in c"),
        "m-cs": ("Writes the backend in C#", "writes the backend in c"),
        "m-blood": ("Blood type: O-", "blood type o"),
        "m-ne": ("The ratio x != 2", "the ratio x 2"),
        "m-amp": ("Likes tea & coffee", "likes tea coffee"),
        "m-usd": ("Balance is -$50", "balance is dollar 50"),
        "m-arrow": ("Commute: Paris -> Berlin", "commute paris berlin"),
        "m-check": ("Passport renewed: \u2713", "passport renewed"),
    }
    sentinel = "0" * 64
    with SqliteStore(path) as s:
        s.put_many([rec(rid, text) for rid, (text, _) in v3.items()] + [rec("m-en", "Lives.")])
        for rid, (_, old) in v3.items():
            s.connection.execute("UPDATE records SET norm_sha256=? WHERE id=?", (_sha(old), rid))
        s.connection.execute("UPDATE records SET norm_sha256=? WHERE id='m-en'", (sentinel,))
        s.connection.execute("PRAGMA user_version=3")
    with SqliteStore(path) as s:
        views = {v.id: v.norm_sha256 for v in s.page_views("u1", NS)[0]}
    after = _keys(path)
    assert after == {rid: norm_sha256(text) for rid, (text, _) in v3.items()} | {"m-en": sentinel}
    assert views == after
    assert len({after["m-cpp"], after["m-cs"], norm_sha256("Writes the backend in C")}) == 3
    assert _version(path) == STORE_VERSION >= 5


def test_a_tombstone_written_at_version_3_still_refuses_what_it_refused(
    store: SqliteStore,
) -> None:
    """Tombstones keep their keys (their content is gone): a text is checked under today's
    key and the older versions' keys, so an erased 'Blood type: O+' written at version 3
    (key of 'blood type o') still refuses the text."""
    store.connection.execute(
        "INSERT INTO tombstones VALUES (?, ?, ?, ?, ?)",
        ("u1", "m-v3", "0" * 64, _sha("blood type o"), "2026-01-01"),
    )
    got = insert_new(store, [rec("m-again", "blood type: O+")])
    assert [(f.id, f.code) for f in got.failed] == [("m-again", "ERASED_CONTENT")]
    assert _sha("blood type o") in tombstone_norms("Blood type: O+")
    assert tombstone_norms("Blood type: O+")[0] == norm_sha256("Blood type: O+")


def test_a_tombstone_written_now_refuses_the_text_not_the_other_sign(store: SqliteStore) -> None:
    add_tombstones(store, [rec("m-old", "Her blood type is A+")])
    got = insert_new(store, [rec("m-case", "her BLOOD type is A+."), rec("m-neg", "Her blood type is A-")])  # fmt: skip
    assert [(f.id, f.code) for f in got.failed] == [("m-case", "ERASED_CONTENT")]
    assert got.succeeded == ["m-neg"]


def test_a_comparison_opening_a_line_is_no_quote_marker() -> None:
    """A "> " at a line's start is a quote marker, unless a number follows: "> 5 years" is
    "more than 5 years" (the session's second review; a quote would drop the comparison)."""
    assert norm_sha256("> 5 years of Python") != norm_sha256("5 years of Python")
    assert norm_sha256("> Likes jazz") == norm_sha256("Likes jazz")
