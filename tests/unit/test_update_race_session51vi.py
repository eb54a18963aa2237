"""Audit 51vi (session 51): an erasure landing inside `memlife import --update` left the
erased text in the store's journal.

`import --update` sorts each line while writing its batches (an id the store holds is an
update) and runs the updates at the end of the file, as a receipted manual run that takes
the store's lease only then. Until that point an erasure is free to run (it needs the
lease, which nobody holds). An update whose record the erasure removed, or whose text it
tombstoned, was still journaled with the imported record as its payload; the applier
refused it (RECORD_MISSING, ERASED_CONTENT), and a terminal failure keeps its payload (only
a receipted operation drops it). The erased text sat in `memlife.db` after `erase` had
compacted the file, and no later night or erasure forgets it (the erasure that could is
over). The interleaving is forced by running the erasure where another process's would
land: after the batches, before the update run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import memlife.importer as importer
from memlife.erase import erase
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke

MARKER = "zqxupdrace51vi"
NS = "/users/u-1/facts"


def line(rid: str, content: str, subject: str = "address") -> str:
    return json.dumps({
        "id": rid, "actor_id": "u-1", "namespace": NS, "memory_type": "semantic",
        "subject": subject, "content": content, "owner": "team-a",
        "created_at": "2026-01-02T10:00:00Z",
    })  # fmt: skip


def files_holding(root: Path, needle: str) -> list[str]:
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("*")
        if p.is_file() and needle.encode() in p.read_bytes()
    )  # fmt: skip


def erasure_before_the_update_run(
    monkeypatch: pytest.MonkeyPatch, home: Path, **request: Any
) -> None:
    """Another operator's `erase` lands after the import's batches and before its update run."""
    original: Callable[..., Any] = importer._apply_updates

    def racing(*args: Any, **kwargs: Any) -> Any:
        with SqliteStore(home / "memlife.db") as other:  # the erasing process's own connection
            assert erase(other, "u-1", **request)["erased"]
        return original(*args, **kwargs)

    monkeypatch.setattr(importer, "_apply_updates", racing)


def test_an_erasure_inside_an_update_import_leaves_no_text_in_the_journal(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """m-1's text was corrected since the backup (both versions carry the marker); the
    restore runs with --update while the person's erasure of m-1 goes through."""
    now, backup = tmp_path / "now.jsonl", tmp_path / "backup.jsonl"
    now.write_text(line("m-1", f"Phone {MARKER} 555-0100, mobile.") + "\n")
    backup.write_text(line("m-1", f"Phone {MARKER} 555-0199.") + "\n")
    assert invoke("import", str(now))[0] == 0
    erasure_before_the_update_run(monkeypatch, home, ids=["m-1"])
    code, out, err = invoke("import", "--update", str(backup), "--json")
    report = json.loads(out)
    assert [c["id"] for c in report["conflicts"]] == ["m-1"] and report["updated"] == 0, err
    with SqliteStore(home / "memlife.db") as store:
        assert store.get("m-1") is None
        payloads = store.connection.execute(
            "SELECT operation_id FROM operations WHERE payload IS NOT NULL"
        ).fetchall()
    assert payloads == []
    assert files_holding(home, MARKER) == []


def test_an_update_to_a_text_erased_meanwhile_is_refused_before_it_is_journaled(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The backup gives m-1 the text of m-9, which the person's erasure of subject `phone`
    removes meanwhile: the update is refused (ERASED_CONTENT) and its text is journaled
    nowhere."""
    now, backup = tmp_path / "now.jsonl", tmp_path / "backup.jsonl"
    now.write_text(line("m-1", "Lives in Lyon.") + "\n"
                   + line("m-9", f"Phone {MARKER} 555-0100.", subject="phone") + "\n")  # fmt: skip
    backup.write_text(line("m-1", f"Phone {MARKER} 555-0100.") + "\n")
    assert invoke("import", str(now))[0] == 0
    erasure_before_the_update_run(monkeypatch, home, subject="phone")
    code, out, err = invoke("import", "--update", str(backup), "--json")
    report = json.loads(out)
    assert [(c["id"], c["code"]) for c in report["conflicts"]] == [("m-1", "ERASED_CONTENT")], err
    with SqliteStore(home / "memlife.db") as store:
        kept = store.get("m-1")
        assert kept is not None and kept.content == "Lives in Lyon."
    assert files_holding(home, MARKER) == []


def test_an_update_with_no_erasure_meanwhile_is_applied_and_keeps_no_payload(
    home: Path, tmp_path: Path
) -> None:
    """Control: the same restore with no erasure updates m-1 (receipted, payload dropped)."""
    now, backup = tmp_path / "now.jsonl", tmp_path / "backup.jsonl"
    now.write_text(line("m-1", "Phone 555-0100, mobile.") + "\n")
    backup.write_text(line("m-1", "Phone 555-0199.") + "\n")
    assert invoke("import", str(now))[0] == 0
    code, out, err = invoke("import", "--update", str(backup), "--json")
    assert code == 0 and json.loads(out)["updated"] == 1, err
    with SqliteStore(home / "memlife.db") as store:
        got = store.get("m-1")
        assert got is not None and got.content == "Phone 555-0199."
        assert store.connection.execute(
            "SELECT count(*) FROM operations WHERE payload IS NOT NULL"
        ).fetchone() == (0,)
