"""A restatement racing the night (session 30 review): `Memory.remember` of a text already
kept refreshes its record, which can make it semantic (no deadline) or push its deadline out
without changing its content. Made between planning and commit, the night superseded the
record anyway with a replacement built from the members as they were, which kept the old
deadline; the night past it deleted the replacement and its sources: the fact the user had
just restated was gone. The group is now withdrawn (`consolidation_withdrawn_changed`) and
the next night regroups what the records say."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from memlife import Memory, pipeline
from memlife.model import MemoryRecord, MemoryType, Status
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore

NS = "/users/u-1/episodes"
TEXT = "Booked a table at Luigi's for the anniversary dinner."
DEADLINE = datetime(2026, 12, 20, tzinfo=UTC)


def _policy(tmp_path: Path) -> str:
    data = yaml.safe_load(Path("policies/default.yaml").read_text())
    data["version"] = "test-restated-ungated"
    data["gate"]["required"] = False  # the night commits without an evaluation set
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _seed(db: Path) -> None:
    with SqliteStore(db) as store:
        store.put_many([
            MemoryRecord.model_validate({
                "id": f"m-{i}", "actor_id": "u-1", "namespace": NS, "memory_type": "episodic",
                "subject": "dinner", "content": TEXT, "owner": "t", "confidence": 0.9,
                "source": "user_stated", "created_at": created, "expires_at": DEADLINE,
            })
            for i, created in ((1, "2026-11-01T10:00:00Z"), (2, "2026-11-15T10:00:00Z"))
        ])  # fmt: skip


@pytest.mark.parametrize("restated_as", ["semantic", "episodic"])
def test_a_fact_restated_while_the_night_runs_outlives_it(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, restated_as: str
) -> None:
    db = home / "memlife.db"
    _seed(db)
    policy = _policy(tmp_path)
    restated: list[str] = []
    real = pipeline.checkpoint

    def restate_then(point: str) -> None:
        if point == "after_stage" and not restated:  # planned and staged, nothing committed
            with Memory(f"sqlite:///{db}") as memory:  # the agent, in its own connection
                got = memory.remember(TEXT, actor="u-1", namespace=NS, subject="dinner",
                                      memory_type=restated_as)  # fmt: skip
            restated.append(got.id)
        real(point)

    monkeypatch.setattr(pipeline, "checkpoint", restate_then)
    night = run_local(RunConfig(dry_run=False, now=datetime(2026, 12, 5, 2, tzinfo=UTC),
                                policy=policy)).as_json()  # fmt: skip
    assert restated, "the race did not happen"
    with SqliteStore(db) as store:
        kept = store.get(restated[0])
        assert kept is not None and kept.status is Status.active, night
        end = kept.expires_at
        assert (kept.memory_type is MemoryType.semantic and end is None) or (
            end is not None and end > DEADLINE
        ), kept
    assert night["other_counts"].get("consolidation_withdrawn_changed") == 1, json.dumps(night)

    monkeypatch.setattr(pipeline, "checkpoint", real)
    after_deadline = datetime(2026, 12, 21, 2, tzinfo=UTC)
    run_local(RunConfig(dry_run=False, now=after_deadline, policy=policy,
                        allow_future_cutoff=True))  # fmt: skip
    with SqliteStore(db) as store:  # the restated fact is still served
        active = [r for r in store.iter_all() if r.status is Status.active]
        assert any(r.content == TEXT for r in active), [r.id for r in store.iter_all()]
