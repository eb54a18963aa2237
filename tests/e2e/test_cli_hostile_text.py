"""Stored values are shown as stored: a record id or owner holding rich markup, terminal
escapes or a newline neither breaks `memlife review list` nor draws on the terminal, and
`review resolve` reports what it did (session 22 review: an id "a[/]" made the whole
table raise MarkupError, and a delete was carried out, then reported as failed)."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memlife.cli.common import printable
from memlife.model import MemoryRecord
from memlife.pipeline import RunConfig, run_local
from memlife.review_queue import ReviewQueue
from memlife.stores.sqlite import SqliteStore

DAY1 = datetime(2026, 1, 5, 8, tzinfo=UTC)
ESC = "\x1b"
HOSTILE = {
    "a[/]": "The user keeps bees.",  # a closing tag with nothing open
    "b[link=https://evil.example]click[/link]": "The user owns a bike.",
    f"c{ESC}[2J{ESC}[31mRED": "The user speaks Welsh.",  # clear the screen, then red
    "d\nrv-0000000000000000 | fake row": "The user plays chess.",
    "e\u202egnp.exe": "The user grows tomatoes.",  # shown reversed without the escape
}
OWNER = "[bold red]ops[/]"


@pytest.fixture()
def home(offline_home: Path) -> Path:
    store = SqliteStore(offline_home / "memlife.db")
    try:
        store.put_many([
            MemoryRecord(id=rid, actor_id="u-7", namespace="/team/notes", memory_type="procedural",
                         content=text, created_at=DAY1, source="agent_inferred", confidence=0.6,
                         owner=OWNER if rid == "a[/]" else None)
            for rid, text in HOSTILE.items()
        ])  # fmt: skip
    finally:
        store.close()
    run_local(RunConfig(dry_run=False, now=DAY1 + timedelta(days=200)))  # stale: review
    return offline_home


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS="250", MEMLIFE_HOME=str(home))
    return subprocess.run([sys.executable, "-m", "memlife", *args, "--store",
                           f"sqlite:///{home}/memlife.db"], capture_output=True, text=True,
                          env=env, timeout=120)  # fmt: skip


def test_review_list_shows_hostile_ids_as_stored_text(home: Path) -> None:
    got = cli(home, "review", "list")
    assert got.returncode == 0, got.stderr
    out = got.stdout
    for rid in HOSTILE:
        assert printable(rid) in out, rid
    assert OWNER in out  # the markup itself, not bold red "ops"
    assert ESC not in out and "\u202e" not in out
    rows = [line for line in out.splitlines() if line.startswith("│")]
    assert len(rows) == len(items(home)) > len(HOSTILE)  # the newline drew no row of its own


def items(home: Path) -> dict[tuple[str, str], str]:
    """Item id by (record id, reason)."""
    store = SqliteStore(home / "memlife.db")
    try:
        return {(i.record_id, i.reason): i.item_id for i in ReviewQueue.for_store(store).list()}
    finally:
        store.close()


def test_resolving_an_item_of_a_hostile_id_reports_its_success(home: Path) -> None:
    ids = items(home)
    for rid in ("a[/]", f"c{ESC}[2J{ESC}[31mRED"):
        iid = ids[(rid, "STALE_VERIFICATION")]
        got = cli(home, "review", "resolve", iid, "--decision", "delete", "--reviewer",
                  "ana", "--receipts", f"file://{home}/receipts")  # fmt: skip
        assert got.returncode == 0, got.stderr
        assert f"(record {printable(rid)}): delete by reviewer ana -> resolved" in got.stderr
        assert ESC not in got.stderr


def test_printable_escapes_controls_and_keeps_every_other_character() -> None:
    assert printable("caf\u00e9 \u6771\u4eac [b]x[/b]") == "caf\u00e9 \u6771\u4eac [b]x[/b]"
    assert printable("a\nb\tc\x1b[0m\x85\u202e") == "a\\nb\\tc\\x1b[0m\\x85\\u202e"
