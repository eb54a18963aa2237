"""Invariant 11 under random interleavings (issue 12): imports, `remember`, erasures (by id
and by subject) and nightly apply runs, some with an erasure landing inside the run between
its group read and its replacement write, never leave erased content in an active record;
every superseded record's replacement chain still ends at an active record (a replacement
can itself be superseded by a later night's replacement)."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlife.consolidate.base import ConsolidationResult, Group
from memlife.consolidate.extractive import ExtractiveConsolidator
from memlife.erase import erase
from memlife.importer import import_file
from memlife.model import Status
from memlife.online.memory import LongTermMemory, RememberRefused
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.support.lifecycle import assert_no_erased_content_active

NOW = datetime(2026, 11, 1, 12, tzinfo=UTC)
NS = "/users/u1/facts"
FACTS = [
    ("city", "The user lives in Paris."),
    ("city", "The user lives in Berlin now."),
    ("city", "the user lives in berlin now"),  # the same statement, folded
    ("city", "The user moved to Rome last spring."),
    ("tea", "Drinks green tea every morning."),
    ("tea", "Drinks only black tea now."),
    ("pet", "Has a dog named Rex."),
]
fact = st.integers(0, len(FACTS) - 1)
OPS = st.one_of(
    st.tuples(st.just("import"), fact),
    st.tuples(st.just("remember"), fact),
    st.tuples(st.just("erase_id"), st.integers(0, 50)),
    st.tuples(st.just("erase_subject"), st.sampled_from(["city", "tea", "pet"])),
    st.tuples(st.just("night"), st.none()),
    st.tuples(st.just("racing_night"), st.integers(0, 50)),
)


class Racing(ExtractiveConsolidator):
    """Erases one record of the first group it sees, on another connection, mid-call."""

    def __init__(self, db: Path, pick: int) -> None:
        super().__init__()
        self.db, self.pick, self.fired = db, pick, False

    def consolidate(self, group: Group) -> ConsolidationResult:
        result = super().consolidate(group)
        if not self.fired:
            self.fired = True
            with SqliteStore(self.db) as other:
                erase(other, "u1", ids=[group.ids[self.pick % len(group.ids)]], now=NOW)
        return result


@contextmanager
def isolated_home() -> Iterator[Path]:
    keys = ("MEMLIFE_HOME", "MEMLIFE_STORE", "MEMLIFE_RECEIPTS")
    saved = {k: os.environ.get(k) for k in keys}
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        os.environ.update(
            MEMLIFE_HOME=str(home),
            MEMLIFE_STORE=f"sqlite:///{home / 'memlife.db'}",
            MEMLIFE_RECEIPTS=f"file://{home / 'receipts'}",
        )
        try:
            yield home
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def check(store: SqliteStore) -> None:
    assert_no_erased_content_active(store, "u1")
    for r in store.iter_all():
        if r.status is Status.superseded:  # its replaced_by chain ends at an active record
            seen, cur = {r.id}, r
            while cur is not None and cur.status is Status.superseded:
                cur = store.get(cur.provenance.replaced_by or "")
                assert cur is None or cur.id not in seen, f"{r.id}: replacement cycle"
                seen.add(cur.id if cur else "")
            assert cur is not None and cur.status is Status.active, f"{r.id} points nowhere"


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(OPS, min_size=2, max_size=7))
def test_erased_content_never_comes_back(ops: list[tuple[str, int | str | None]]) -> None:
    with isolated_home() as home:
        db = home / "memlife.db"
        store = SqliteStore(db)
        mem = LongTermMemory(store)
        try:
            for step, (op, arg) in enumerate(ops):
                at = NOW - timedelta(days=40 - step)
                if op == "import":
                    subject, text = FACTS[int(arg)]  # type: ignore[arg-type]
                    line = {
                        "id": f"imp-{step}",
                        "actor_id": "u1",
                        "namespace": NS,
                        "memory_type": "semantic",
                        "subject": subject,
                        "content": text,
                        "owner": "team-a",
                        "created_at": at.isoformat(),
                    }
                    src = home / f"in-{step}.jsonl"
                    src.write_text(json.dumps(line) + "\n")
                    rep = import_file(store, src, now=NOW)
                    assert rep.imported + len(rep.conflicts) == 1
                    assert all(c["code"] == "ERASED_CONTENT" for c in rep.conflicts)
                elif op == "remember":
                    subject, text = FACTS[int(arg)]  # type: ignore[arg-type]
                    try:
                        mem.remember("u1", NS, subject, text, at=at)
                    except RememberRefused as exc:
                        assert exc.code == "ERASED_CONTENT"
                elif op == "erase_id":
                    ids = sorted(r.id for r in store.iter_all() if r.actor_id == "u1")
                    if ids:
                        erase(store, "u1", ids=[ids[int(arg) % len(ids)]], now=NOW)  # type: ignore[arg-type]
                elif op == "erase_subject":
                    erase(store, "u1", subject=str(arg), now=NOW)
                else:
                    racer = Racing(db, int(arg)) if op == "racing_night" else None  # type: ignore[arg-type]
                    night = run_local(
                        RunConfig(dry_run=False, now=NOW + timedelta(days=step)), consolidator=racer
                    )
                    assert night.status in ("success", "partial_failure")
                mem.invalidate()
                check(store)
        finally:
            mem.close()
            store.close()
