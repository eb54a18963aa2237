"""Audit 52i (session 52: the CLI as a careless operator and a shell script use it): the
files `memlife export` writes.

README: "`export` refuses (exit 2) an output file that is the store's own ...; its files
appear only once all are written (a failure part way leaves the old ones)". Since the
export writes each file beside its place and renames it there (``export_files.Staged``):

1. an output file that exists was replaced by a new file: its permissions were lost. A
   backup kept ``chmod 600`` (every memory's text) became world-readable (0644 under the
   usual umask) at the next export; and an output that is a symbolic link (``latest.jsonl
   -> /vault/...``) was itself replaced by a regular file, the file it points to left
   stale, exit 0. A plain write (``export > F``, what `-o` stands for) keeps both.
2. ``-o -``, the usual spelling of stdout (``memlife export -o - | gzip``), wrote every
   record into a file named ``-`` in the current folder and nothing to the pipe, exit 0:
   the script's backup was empty.
3. an output whose folder does not exist was found only when its file was opened: after
   every record was read and written for ``-o``, and the error named a hidden temporary
   file nobody typed (``[Errno 2] ... '.../.e.jsonl.c8898452.tmp'``), not the flag.
"""

from __future__ import annotations

import json
import os
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memlife.model import MemoryRecord, MemoryType
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke


def _seed(home: Path, n: int = 3) -> None:
    home.mkdir(parents=True, exist_ok=True)
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([
            MemoryRecord(id=f"m-{i}", actor_id="u-1", namespace="/users/u-1/facts",
                         memory_type=MemoryType.semantic, content=f"Has appointment {i}.",
                         created_at=datetime(2025, 1, 1, tzinfo=UTC), owner="u-1")
            for i in range(n)
        ])  # fmt: skip


def _ids(path: Path) -> list[str]:
    return [json.loads(line)["id"] for line in path.read_text().splitlines()]


def test_an_export_over_an_existing_file_keeps_its_permissions(home: Path, tmp_path: Path) -> None:
    _seed(home)
    out, erasures = tmp_path / "all.jsonl", tmp_path / "erasures.jsonl"
    for path in (out, erasures):
        path.write_text("old\n")
        path.chmod(0o600)  # the operator keeps the backup of every memory private
    code, _, err = invoke("export", "-o", str(out), "--erasures", str(erasures))
    assert code == 0, err
    assert _ids(out) == ["m-0", "m-1", "m-2"]
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert stat.S_IMODE(erasures.stat().st_mode) == 0o600


def test_an_export_to_a_new_file_is_written(home: Path, tmp_path: Path) -> None:
    """Control: a new file is written whole, with the mode any new file gets here."""
    _seed(home)
    out = tmp_path / "new.jsonl"
    code, _, err = invoke("export", "-o", str(out))
    assert code == 0, err
    assert _ids(out) == ["m-0", "m-1", "m-2"]
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask


def test_an_export_through_a_symbolic_link_writes_the_file_it_names(
    home: Path, tmp_path: Path
) -> None:
    _seed(home)
    vault = tmp_path / "vault"
    vault.mkdir()
    target = vault / "backup.jsonl"
    target.write_text("old\n")
    link = tmp_path / "latest.jsonl"
    link.symlink_to(target)
    code, _, err = invoke("export", "-o", str(link))
    assert code == 0, err
    assert link.is_symlink(), "the link was replaced by a file"
    assert _ids(target) == ["m-0", "m-1", "m-2"]
    assert [p.name for p in vault.iterdir()] == ["backup.jsonl"]  # no temporary file left


def test_output_dash_is_stdout(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _seed(home)
    monkeypatch.chdir(tmp_path)
    code, out, err = invoke("export", "-o", "-")
    assert code == 0, err
    assert [json.loads(line)["id"] for line in out.splitlines()] == ["m-0", "m-1", "m-2"]
    assert not (tmp_path / "-").exists()


def test_a_dash_for_the_side_files_is_refused(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """stdout holds the records; erasures or the access history there would mix with them."""
    _seed(home)
    monkeypatch.chdir(tmp_path)
    for flag in ("--erasures", "--access"):
        code, out, err = invoke("export", "-o", str(tmp_path / "all.jsonl"), flag, "-")
        assert code == 2 and flag in err, (flag, err)
        assert not (tmp_path / "-").exists() and not (tmp_path / "all.jsonl").exists()


def test_stdout_by_default(home: Path) -> None:
    """Control: without -o the records go to stdout."""
    _seed(home)
    code, out, err = invoke("export")
    assert code == 0, err
    assert [json.loads(line)["id"] for line in out.splitlines()] == ["m-0", "m-1", "m-2"]


@pytest.mark.parametrize("flag", ["--output", "--erasures", "--access"])
def test_an_output_folder_that_does_not_exist_is_named_by_its_flag(
    home: Path, tmp_path: Path, flag: str
) -> None:
    _seed(home)
    out = tmp_path / "out"
    out.mkdir()
    missing = out / "no-such-folder" / "file"
    args = ["export", "-o", str(out / "all.jsonl"), flag, str(missing)]
    if flag == "--output":
        args = ["export", "-o", str(missing)]
    code, _, err = invoke(*args)
    assert code == 2, err
    assert flag in err and str(missing.parent) in err and ".tmp" not in err, err
    assert [p.name for p in out.iterdir()] == []  # nothing written, nothing left behind


def test_an_output_in_an_existing_folder_is_written(home: Path, tmp_path: Path) -> None:
    """Control: the same three files in a folder that exists are all written."""
    _seed(home)
    files = {flag: tmp_path / name for flag, name in
             (("-o", "all.jsonl"), ("--erasures", "e.jsonl"), ("--access", "a.parquet"))}  # fmt: skip
    code, _, err = invoke("export", *[x for f, p in files.items() for x in (f, str(p))])
    assert code == 0, err
    assert all(p.is_file() for p in files.values())
