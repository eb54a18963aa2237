"""Store version 6 (session 45, audits 45a and 45c): a point between digits is a word in
the statement key: "Takes 1.5 mg" is no longer "Takes 1-5 mg" (a range), "1/5 mg" or
"1 5 mg". A decimal dose after a range was an exact duplicate: the older record was
refreshed and verified, and the new number was lost. An older store's rows holding a
point before a digit are recomputed when the file is opened; an erasure tombstone
written at version 5 keeps its key and still refuses what it refused."""

from __future__ import annotations

from pathlib import Path

from memlife.fold_versions import v5_norm_sha256
from memlife.stores.sqlite import STORE_VERSION, SqliteStore, tombstone_norms
from memlife.text import norm_sha256
from memlife.tombstones import insert_new
from tests.unit.test_fold_session26 import _keys, _version, rec


def test_a_decimal_is_not_a_range() -> None:
    for other in ("Takes 1-5 mg", "Takes 1/5 mg", "Takes 1 5 mg", "Takes 1:5 mg", "Takes 15 mg"):
        assert norm_sha256("Takes 1.5 mg") != norm_sha256(other), other
    assert norm_sha256("Takes 1.5 MG!") == norm_sha256("takes 1.5 mg")  # form still folds
    assert norm_sha256("Takes .5 mg") == norm_sha256("Takes 0.5 mg")  # version 5 holds
    assert norm_sha256("Ends at 5.") == norm_sha256("Ends at 5")  # a full stop stays one
    assert norm_sha256("Read 1..5") == norm_sha256("Read 1 5")  # a range's points too


def test_reopening_a_version_5_store_recomputes_the_rows_an_inner_point_changes(
    tmp_path: Path,
) -> None:
    path = tmp_path / "m.db"
    sentinel = "0" * 64
    with SqliteStore(path) as s:
        s.put_many([rec("m-dose", "Takes 1.5 mg of Xanax"), rec("m-ip", "Server is 10.0.0.5"),
                    rec("m-en", "Lives in Oslo.")])  # fmt: skip
        for rid, text in (("m-dose", "Takes 1.5 mg of Xanax"), ("m-ip", "Server is 10.0.0.5")):
            s.connection.execute(
                "UPDATE records SET norm_sha256=? WHERE id=?", (v5_norm_sha256(text), rid)
            )
        s.connection.execute("UPDATE records SET norm_sha256=? WHERE id='m-en'", (sentinel,))
        s.connection.execute("PRAGMA user_version=5")
    with SqliteStore(path):
        pass
    assert _keys(path) == {"m-dose": norm_sha256("Takes 1.5 mg of Xanax"),
                           "m-ip": norm_sha256("Server is 10.0.0.5"), "m-en": sentinel}  # fmt: skip
    assert _version(path) == STORE_VERSION == 6


def test_a_tombstone_written_at_version_5_still_refuses_what_it_refused(tmp_path: Path) -> None:
    """An erased "Takes 1.5 mg" written at version 5 holds the key of "takes 1 5 mg": the
    text is still refused (today's key is checked first, the version-5 key after)."""
    with SqliteStore(tmp_path / "m.db") as s:
        s.connection.execute(
            "INSERT INTO tombstones VALUES (?, ?, ?, ?, ?)",
            ("u1", "m-v5", "0" * 64, v5_norm_sha256("Takes 1.5 mg"), "2026-01-01"),
        )
        got = insert_new(s, [rec("m-again", "takes 1.5 MG"), rec("m-new", "Takes 2.5 mg")])
        assert [(f.id, f.code) for f in got.failed] == [("m-again", "ERASED_CONTENT")]
    assert tombstone_norms("Takes 1.5 mg")[0] == norm_sha256("Takes 1.5 mg")
    assert v5_norm_sha256("Takes 1.5 mg") in tombstone_norms("Takes 1.5 mg")
