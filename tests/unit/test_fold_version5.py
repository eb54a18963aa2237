"""Store version 5 (session 44; was Left since session 43): a decimal point opening a
number is read as "0." in the statement key (``text.symbols_as_words``): ".5 mg" is
"0.5 mg", no longer "5 mg". An older store's rows holding one are recomputed when the file
is opened; an erasure tombstone written at version 4 keeps its key and still refuses what
it refused."""

from __future__ import annotations

from pathlib import Path

from memlife.fold_versions import v4_norm_sha256
from memlife.stores.sqlite import STORE_VERSION, SqliteStore, tombstone_norms
from memlife.text import norm_sha256
from memlife.tombstones import insert_new
from tests.unit.test_fold_session26 import _keys, _version, rec


def test_a_leading_point_is_the_number_it_opens() -> None:
    assert norm_sha256("Takes .5 mg") == norm_sha256("Takes 0.5 mg")
    assert norm_sha256("Takes .5 mg") != norm_sha256("Takes 5 mg")
    assert norm_sha256("Balance is -.5 dollars") == norm_sha256("Balance is -0.5 dollars")
    assert norm_sha256("Uses version v.5") == norm_sha256("Uses version v 5")  # no number opens
    assert norm_sha256("Read 1..5") == norm_sha256("Read 1 5")  # a range's points stay punctuation


def test_reopening_a_version_4_store_recomputes_the_rows_a_leading_point_changes(
    tmp_path: Path,
) -> None:
    """The rows whose content holds a '.' before a digit get their key recomputed; others
    are not written (a sentinel key stays)."""
    path = tmp_path / "m.db"
    sentinel = "0" * 64
    with SqliteStore(path) as s:
        s.put_many([rec("m-dose", "Takes .5 mg of Xanax"), rec("m-bac", "BAC was .08"),
                    rec("m-en", "Lives in Oslo.")])  # fmt: skip
        for rid, text in (("m-dose", "Takes .5 mg of Xanax"), ("m-bac", "BAC was .08")):
            s.connection.execute(
                "UPDATE records SET norm_sha256=? WHERE id=?", (v4_norm_sha256(text), rid)
            )
        s.connection.execute("UPDATE records SET norm_sha256=? WHERE id='m-en'", (sentinel,))
        s.connection.execute("PRAGMA user_version=4")
    with SqliteStore(path):
        pass
    assert _keys(path) == {"m-dose": norm_sha256("Takes 0.5 mg of Xanax"),
                           "m-bac": norm_sha256("BAC was 0.08"), "m-en": sentinel}  # fmt: skip
    assert _version(path) == STORE_VERSION >= 5


def test_a_tombstone_written_at_version_4_still_refuses_what_it_refused(tmp_path: Path) -> None:
    """An erased "Takes .5 mg" written at version 4 holds the key of "takes 5 mg": the text
    (and, as then, "Takes 5 mg") is still refused; today's key is checked first."""
    with SqliteStore(tmp_path / "m.db") as s:
        s.connection.execute(
            "INSERT INTO tombstones VALUES (?, ?, ?, ?, ?)",
            ("u1", "m-v4", "0" * 64, v4_norm_sha256("Takes .5 mg"), "2026-01-01"),
        )
        got = insert_new(s, [rec("m-again", "takes .5 MG"), rec("m-other", "Takes 5 mg")])
        assert sorted((f.id, f.code) for f in got.failed) == [
            ("m-again", "ERASED_CONTENT"), ("m-other", "ERASED_CONTENT")]  # fmt: skip
    assert tombstone_norms("Takes .5 mg")[0] == norm_sha256("Takes .5 mg")
    assert v4_norm_sha256("Takes .5 mg") in tombstone_norms("Takes .5 mg")
