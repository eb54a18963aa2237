"""Audit 52i (session 52: the CLI as a careless operator and a shell script use it): the file
`memlife eval init --force` writes.

`eval init -o eval/cases.jsonl --force` wrote the set in place: the old file was
truncated first, then written. A write that failed part way (a full disk, a file size
limit: exit 1, ``OSError: [Errno 27] File too large``) left the head of the new set where
the reviewed one had been. Cut at a line's end, it loads as a valid, smaller set: the next
`memlife run --eval-cases eval/cases.jsonl` gates the night with the cases that happened
to be written, and the reviewed set is gone. `export` writes beside its place and renames
(README: "a failure part way leaves the old ones"); `eval init` now does the same.

The failure is a real one: the command runs in a child process under RLIMIT_FSIZE (the
kernel refuses the write past the limit with EFBIG; Python ignores SIGXFSZ), the limit
set at the end of a line of the set a first run wrote.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

from memlife.evalset import load_cases
from tests.conftest import REPO
from tests.support.cli import invoke

NOW = "2026-12-01T02:00:00Z"
ARGS = ("eval", "init", "--now", NOW, "--actors", "40")


def _a_set(home: Path, tmp_path: Path) -> tuple[Path, bytes]:
    code, _, err = invoke("demo", "-n", "2000", "--seed", "7", "--anchor", NOW)
    assert code == 0, err
    reviewed = tmp_path / "cases.jsonl"
    code, _, err = invoke(*ARGS, "-o", str(reviewed))
    assert code == 0, err
    return reviewed, reviewed.read_bytes()


def _init_with_a_size_limit(output: Path, limit: int) -> subprocess.CompletedProcess[str]:
    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run(
        [sys.executable, "-m", "memlife", *ARGS, "-o", str(output), "--force"],
        cwd=REPO, env={**os.environ, "NO_COLOR": "1", "TERM": "dumb"},
        preexec_fn=limited, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _limit_at_a_line_end(data: bytes) -> int:
    """The end of the first line past 40 KiB (a SQLite -shm file is 32 KiB: the store must
    still open), short of the whole set."""
    end = data.index(b"\n", 40_000) + 1
    assert end < len(data), "the set is too small for this test"
    return end


def test_a_write_that_fails_part_way_leaves_the_reviewed_set(home: Path, tmp_path: Path) -> None:
    reviewed, before = _a_set(home, tmp_path)
    done = _init_with_a_size_limit(reviewed, _limit_at_a_line_end(before))
    assert done.returncode != 0, done.stderr  # the write failed, and says so
    assert "Traceback" not in done.stderr
    lines = before.count(b"\n")
    assert reviewed.read_bytes() == before, (
        f"the reviewed set was replaced by {len(load_cases(reviewed))} of {lines} cases"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cases.jsonl", "home"]  # no temporary


def test_a_write_under_the_limit_replaces_the_set(home: Path, tmp_path: Path) -> None:
    """Control: with room for the whole set, --force replaces the file with a set that
    loads (the same set: the store and --now did not change)."""
    reviewed, before = _a_set(home, tmp_path)
    reviewed.write_text(reviewed.read_text().split("\n", 1)[0] + "\n")  # an older, smaller set
    done = _init_with_a_size_limit(reviewed, len(before) + 64_000)
    assert done.returncode == 0, done.stderr
    assert reviewed.read_bytes() == before
    assert len(load_cases(reviewed)) == before.count(b"\n")
