"""Audit 51i (session 51): `memlife import --erasures FILE` against a hostile erasures file.

The records file is read with a bound on every line ("a longer line is skipped to its
newline, never held": importer.bounded_lines, line_spans), and the erasures file has a
bound of its own (``erasure_export.LINE_MAX``, 64 KiB: "a bound keeps a hostile file
cheap"). But the bound was checked only after the whole line had been read: the CLI
hands the open file to ``parse_erasures``, which iterated it line by line, so a damaged
or hostile erasures file with no newline (a disk image, 1 GB of zeros, a binary dropped
in by mistake) was read into memory whole before it was refused. The file is parsed
before any record is imported, so an import with ``--erasures`` of such a file needed as
much memory as the file is large.
"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memlife.cli import app
from memlife.erasure_export import LINE_MAX, parse_erasures
from memlife.errors import InputError
from memlife.stores.sqlite import SqliteStore
from tests.support.records import good

_TOMBSTONE = json.dumps({"kind": "tombstone", "actor_id": "u-9", "record_id": "gone-1",
                         "content_sha256": "a" * 64, "norm_sha256": None})  # fmt: skip
_HUGE = 32 << 20  # 512 times the line bound: what a 1 GB line does, at a test's size


def _huge_line_file(path: Path, before: list[str]) -> Path:
    """``before`` lines, then one line of _HUGE bytes with no newline (written in pieces)."""
    with path.open("wb") as f:
        for line in before:
            f.write(line.encode() + b"\n")
        piece = b"0" * (1 << 20)
        for _ in range(_HUGE // len(piece)):
            f.write(piece)
    return path


def _peak_while_parsing(path: Path) -> tuple[int, str]:
    """Python's peak allocation while ``parse_erasures`` reads ``path`` as the CLI opens it
    (``memlife/cli/data.py``: binary, handed over as the file), and the refusal. A
    one-line file is parsed first, so the modules a first line loads are not counted."""
    warm = path.with_name("warm.jsonl")
    warm.write_text(_TOMBSTONE + "\n", encoding="utf-8")
    with warm.open("rb") as f:
        parse_erasures(f)
    tracemalloc.start()
    try:
        with path.open("rb") as f, pytest.raises(InputError) as refused:
            parse_erasures(f)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, str(refused.value)


def test_an_erasures_line_without_end_is_refused_at_its_bound_not_read_whole(
    tmp_path: Path,
) -> None:
    """A 32 MiB line with no newline is refused as "longer than LINE_MAX" by line number;
    the reader holds about the bound, not the file (before the fix: the whole 32 MiB)."""
    path = _huge_line_file(tmp_path / "e.jsonl", [_TOMBSTONE])
    peak, why = _peak_while_parsing(path)
    assert "erasures line 2" in why and f"longer than {LINE_MAX}" in why
    assert peak < 1 << 20, f"held {peak} bytes to refuse a line over {LINE_MAX}"


def test_control_an_over_long_erasures_line_refuses_the_file_before_any_record(
    home: Path, tmp_path: Path
) -> None:
    """Control (passes before and after the fix): the same file through `memlife import
    --erasures` is refused by line number (exit 2) and no record of the import is stored."""
    src = tmp_path / "r.jsonl"
    src.write_text(json.dumps(good("m-1")) + "\n", encoding="utf-8")
    erasures = _huge_line_file(tmp_path / "e.jsonl", [_TOMBSTONE])
    db = tmp_path / "s.db"
    res = CliRunner().invoke(
        app, ["import", str(src), "--store", f"sqlite:///{db}", "--erasures", str(erasures)]
    )
    assert res.exit_code == 2, res.output
    assert "erasures line 2" in res.output and f"longer than {LINE_MAX}" in res.output
    assert not db.exists() or SqliteStore(db).get("m-1") is None


def test_control_lines_at_and_past_the_bound_read_as_before(tmp_path: Path) -> None:
    """Control: a line of exactly LINE_MAX bytes (its newline included) is a tombstone like
    any other, and one a byte longer, newline and all, is refused by number: the bounded
    read changes what is read, never what is taken."""
    body = _TOMBSTONE[:-1]
    at_bound = body + " " * (LINE_MAX - len(body) - 2) + "}\n"
    one_over = body + " " * (LINE_MAX - len(body) - 1) + "}\n"
    ok = tmp_path / "ok.jsonl"
    ok.write_bytes(at_bound.encode() + at_bound.encode())
    with ok.open("rb") as f:
        tombs, pending = parse_erasures(f)
    assert len(tombs) == 2 and pending == []
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(at_bound.encode() + one_over.encode() + at_bound.encode())
    with bad.open("rb") as f, pytest.raises(InputError, match="erasures line 2: longer than"):
        parse_erasures(f)
