"""Issue 12, case 6 (time): a cutoff far ahead of the clock is refused for apply runs, and
a statement dated in the future never wins a consolidation. Each test failed before."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from typer.testing import CliRunner

from memlife.cli import app
from memlife.model import MemoryRecord, MemoryType, Status
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore

NOW = datetime(2026, 11, 1, 12, tzinfo=UTC)


def test_apply_refuses_a_cutoff_far_ahead_of_the_clock(home: Path) -> None:
    runner = CliRunner()
    with SqliteStore(home / "memlife.db") as s:
        s.put_many(
            [
                MemoryRecord(
                    id="m-1",
                    actor_id="u-1",
                    namespace="/users/u-1/episodes",
                    memory_type=MemoryType.episodic,
                    content="Went hiking.",
                    created_at=NOW - timedelta(days=30),
                )
            ]
        )
    res = runner.invoke(app, ["run", "--engine", "local", "--now", "9999-12-30T00:00:00Z"])
    assert res.exit_code == 2
    assert "48 h ahead" in " ".join(res.stderr.split()) and "--allow-future-cutoff" in res.stderr
    with SqliteStore(home / "memlife.db") as s:
        assert s.get("m-1") is not None
    ahead = (datetime.now(UTC) + timedelta(days=3)).isoformat()
    assert runner.invoke(app, ["run", "--engine", "local", "--now", ahead]).exit_code == 2
    # a dry run changes nothing; a cutoff in the past is a replay: both allowed
    dry = runner.invoke(
        app, ["run", "--engine", "local", "--dry-run", "--now", "9999-12-30T00:00:00Z"]
    )
    assert dry.exit_code == 0, dry.output
    past = runner.invoke(app, ["run", "--engine", "local", "--now", NOW.isoformat()])
    assert past.exit_code == 0, past.output
    forced = runner.invoke(
        app, ["run", "--engine", "local", "--now", ahead, "--allow-future-cutoff"]
    )
    assert forced.exit_code == 0, forced.output


def test_a_statement_dated_2099_never_wins_a_consolidation(home: Path) -> None:
    def rec(rid: str, content: str, when: datetime) -> MemoryRecord:
        return MemoryRecord(
            id=rid,
            actor_id="u-1",
            namespace="/users/u-1/facts",
            memory_type=MemoryType.semantic,
            content=content,
            subject="city",
            owner="team-a",
            created_at=when,
        )

    with SqliteStore(home / "memlife.db") as s:
        s.put_many(
            [
                rec("m-old", "The user lives in Paris.", NOW - timedelta(days=300)),
                rec("m-2099", "The user lives in Rome.", datetime(2099, 1, 1, tzinfo=UTC)),
                rec("m-new", "The user lives in Berlin.", NOW - timedelta(days=3)),
            ]
        )
    for night in range(3):
        assert (
            run_local(RunConfig(dry_run=False, now=NOW + timedelta(days=night))).status == "success"
        )
    with SqliteStore(home / "memlife.db") as s:
        live = [r for r in s.iter_all() if r.status is Status.active]
    assert live, "something about the city stays active"
    assert all("Rome" not in r.content for r in live if r.id.startswith("r-"))
    assert any("Berlin" in r.content for r in live)
    assert all(r.created_at <= NOW + timedelta(days=3) for r in live if r.id.startswith("r-"))
