"""Session 46 (audit 46a): DynamoDB plans a group's write and supersedes in one TransactWriteItems
(session 45, audit 45f), but only up to 100 operations. A group's supersedes are all its
members (the cap bounds what the model sees, not what the replacement supersedes), so a
subject restated 100 times journals 101 operations one by one, and a night throttled
between the write's put and its supersedes' leaves the write alone, as before the fix."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from urllib.parse import urlencode

import pytest

import memlife.state as state_mod
from memlife.demo import generate
from memlife.model import MemoryRecord
from memlife.state.dynamodb import DynamoState
from memlife.stores.sqlite import SqliteStore
from tests.fakes.agentcore import AgentCoreHarness, bulk_load
from tests.support.aws_state import provision, state_url
from tests.support.lifecycle import ANCHOR, gate_cases
from tests.unit.test_dynamo_throttled_state_session45 import Throttle, _done, _night, _view

RESTATED = 101  # members of one group: a write and 101 supersedes, past a transaction's 100


@pytest.fixture(scope="module")
def harness():
    h = AgentCoreHarness()
    yield h
    h.close()


def _records() -> list[MemoryRecord]:
    recs = list(generate(30, seed=3, anchor=ANCHOR, per_actor=30))
    base = recs[0]
    tea = [
        MemoryRecord.model_validate(
            {
                **base.model_dump(mode="json"),
                "id": f"m-tea-{i:03d}",
                "subject": "beverage",
                "memory_type": "semantic",
                "retention_class": "standard",
                "expires_at": None,
                "status": "active",
                "content": "Drinks green tea every morning.",
                "created_at": (ANCHOR - timedelta(days=200 - i)).isoformat(),
                "provenance": {"source_event": f"evt-{i}"},
            }  # fmt: skip
        )
        for i in range(RESTATED)
    ]
    return recs + tea


def _replacements(records: object) -> list[tuple[str, int]]:
    """Each replacement's status and how many records it supersedes."""
    return sorted((r.status.value, len(r.provenance.supersedes))
                  for r in records if r.provenance.supersedes)  # fmt: skip


def test_a_group_of_over_100_members_throttled_after_its_write_makes_one_replacement(
    harness: AgentCoreHarness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The adversary throttles every journal put of a supersede operation on the first
    night (a group of 101 restatements: its 102 operations do not fit one transaction).
    The rerun on a calm table must leave the records and receipts SQLite's night leaves:
    one replacement, every restatement superseded by it."""
    monkeypatch.delenv("MEMLIFE_STORE", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("MEMLIFE_STATE", "local")
    monkeypatch.setenv("MEMLIFE_TASK_RETRIES", "0")
    recs = _records()
    cases = gate_cases(tmp_path / "x.db", recs)
    sq_home = tmp_path / "sq"
    sq_home.mkdir()
    with SqliteStore(sq_home / "memlife.db") as db:
        db.put_many(recs)
    monkeypatch.setenv("MEMLIFE_HOME", str(sq_home))
    code_sq, sq = _night(sq_home, f"sqlite:///{sq_home / 'memlife.db'}", cases)
    assert code_sq == 0 and sq["status"] == "success"

    store = harness.store()
    bulk_load(store, harness.fake, recs)
    query = {"region": "us-east-1", "endpoint_url": harness.fake.endpoint_url,
             "sidecar_table": harness.sidecar_table}  # fmt: skip
    url = f"agentcore://{harness.fake.memory_id}?{urlencode(query)}"
    surl = state_url("st46a-big-group")
    provision(surl)
    throttle = Throttle("PutItem", 0, "ThrottlingException", kind="supersede")
    made = DynamoState.__init__

    def hooked(self: DynamoState, *a: object, **kw: object) -> None:
        made(self, *a, **kw)
        for name in ("PutItem", "TransactWriteItems"):
            self.ddb.meta.events.register_first(f"before-call.dynamodb.{name}", throttle)

    ac_home = tmp_path / "ac"
    monkeypatch.setenv("MEMLIFE_HOME", str(ac_home))
    monkeypatch.setattr(state_mod, "_open", {})
    monkeypatch.setattr(DynamoState, "__init__", hooked)
    code1, first = _night(ac_home, url, cases, "--state", surl)
    assert throttle.thrown, "the throttle never fired"
    assert code1 != 0 or first.get("status") in ("partial_failure", "failure"), first
    monkeypatch.setattr(DynamoState, "__init__", made)
    monkeypatch.setattr(state_mod, "_open", {})
    code2, again = _night(ac_home, url, cases, "--state", surl)
    assert code2 == 0 and again["status"] == "success", again
    with SqliteStore(sq_home / "memlife.db") as sq_store:
        assert _replacements(store.iter_all()) == _replacements(sq_store.iter_all())
        assert _view(store.iter_all()) == _view(sq_store.iter_all())
    assert _done(ac_home) == _done(sq_home)
