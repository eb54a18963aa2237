"""Session 45 (audit 45a): every record a night processes lands in exactly one outcome (121fde0,
memlife/run_finish.py), over random small stores: dry and apply runs, enforced and
rollout namespaces, expired episodes, superseded records past retention, pending deletes
past grace, restatements to consolidate, and no evaluation set (the gate withholds)."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memlife.model import MemoryRecord, MemoryType, Provenance, Status
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore

NOW = datetime(2026, 11, 1, 12, tzinfo=UTC)
OUTCOMES = ("retained", "consolidated", "superseded", "deleted", "quarantined", "reviewed",
            "held", "failed")  # fmt: skip
NAMESPACES = ("/users/u-1/facts", "/users/u-1/episodes", "/users/u-1/notes")  # last: rollout
TEXTS = ("The user lives in Oslo.", "The user lives in Oslo!", "The user now lives in Bergen.",
         "The user drinks green tea.", "The user does not drink green tea.",
         "Went hiking on the ridge trail.")  # fmt: skip

ROW = st.tuples(
    st.sampled_from(NAMESPACES),
    st.sampled_from(TEXTS),
    st.sampled_from([MemoryType.semantic, MemoryType.episodic]),
    st.sampled_from(["active", "superseded", "pending_delete"]),
    st.integers(min_value=0, max_value=400),  # age in days
)


def _records(rows: list[tuple[str, str, MemoryType, str, int]]) -> list[MemoryRecord]:
    out = []
    for i, (ns, text, kind, status, age) in enumerate(rows):
        at = NOW - timedelta(days=age)
        extra: dict = {}
        if status == "superseded":
            extra = dict(status=Status.superseded, status_changed_at=at + timedelta(days=1),
                         provenance=Provenance(replaced_by=f"gone-{i}"))  # fmt: skip
        elif status == "pending_delete":
            extra = dict(status=Status.pending_delete, status_changed_at=at + timedelta(days=1))
        out.append(MemoryRecord(id=f"r-{i}", actor_id="u-1", namespace=ns, content=text,
                                memory_type=kind, created_at=at, **extra))  # fmt: skip
    return out


@pytest.mark.filterwarnings("ignore")
@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # fmt: skip
@given(rows=st.lists(ROW, min_size=1, max_size=6), dry=st.booleans())
def test_every_processed_record_lands_in_one_outcome(
    rows: list[tuple[str, str, MemoryType, str, int]], dry: bool, home: Path, tmp_path: Path
) -> None:
    """The adversary is the data: any mix of the states a night decides on, in a dry or an
    apply run with no evaluation set. Must hold: the run's lifecycle counts sum to the
    records it processed, and processed is the number of records it planned."""
    fresh = Path(tempfile.mkdtemp(dir=tmp_path))  # a home per example: no journal of the last
    with pytest.MonkeyPatch.context() as env:
        env.setenv("MEMLIFE_HOME", str(fresh))
        env.setenv("MEMLIFE_STORE", f"sqlite:///{fresh / 'memlife.db'}")
        env.setenv("MEMLIFE_RECEIPTS", f"file://{fresh / 'receipts'}")
        with SqliteStore(fresh / "memlife.db") as s:
            s.put_many(_records(rows))
        summary = run_local(RunConfig(dry_run=dry, now=NOW, workers=1))
    life = summary.lifecycle
    assert life["processed"] == sum(life[k] for k in OUTCOMES), (life, summary.other)


def _night(home: Path, records: list[MemoryRecord], *, dry: bool) -> dict[str, int]:
    home.mkdir(parents=True, exist_ok=True)
    with SqliteStore(home / "memlife.db") as s:
        s.put_many(records)
    return run_local(RunConfig(dry_run=dry, now=NOW, workers=1)).lifecycle


def test_a_consolidation_the_gate_withholds_is_retained(home: Path) -> None:
    """The operator runs an apply night with no evaluation set over an enforced namespace
    holding two restatements: the merge is staged, the gate withholds it (GATE_NOT_CONFIGURED,
    both records stay as they are). As with a withheld deletion (121fde0), both processed
    records must land in an outcome: retained."""
    life = _night(home, _records([("/users/u-1/facts", "The user lives in Oslo.",
                                   MemoryType.semantic, "active", 30),
                                  ("/users/u-1/facts", "The user lives in Oslo!",
                                   MemoryType.semantic, "active", 20)]), dry=False)  # fmt: skip
    assert life["processed"] == 2 and life["consolidated"] == life["superseded"] == 0, life
    assert life["processed"] == sum(life[k] for k in OUTCOMES), life


def test_a_dry_runs_planned_deletion_lands_in_an_outcome(home: Path) -> None:
    """A dry run over a record superseded 200 days ago in an enforced namespace (a deletion
    an apply run would make): the same record in a rollout namespace counts as retained
    (a proposal), so the enforced one must land in an outcome too, not in none."""
    life = _night(home, _records([("/users/u-1/facts", "The user lives in Oslo.",
                                   MemoryType.semantic, "superseded", 200)]), dry=True)  # fmt: skip
    assert life["processed"] == sum(life[k] for k in OUTCOMES), life
