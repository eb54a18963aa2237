"""Guards a second mutation audit found unattacked (session 33b: the gate, the review queue,
compaction, online recall, receipts, the policy): each test holds one guarantee that a
named guard in memlife/ alone keeps, and fails when that guard is removed or loosened."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from memlife.ledger import AccessLedger
from memlife.model import MemoryRecord, Status
from memlife.online.compaction import compact
from memlife.online.history import validate_history
from memlife.online.memory import LongTermMemory
from memlife.plan import Action, Decision, Reason
from memlife.policy import PolicyError, load_policy
from memlife.review_queue import ReviewQueue, item_id, resolve
from memlife.stores.sqlite import SqliteStore
from tests.fakes.messages_api import MessagesServer

T0 = datetime(2026, 11, 1, 2, tzinfo=UTC)


# -- 1. review_queue/resolving.py: a removing decision closes the record's other items -------
def test_deleting_a_record_by_review_closes_its_other_open_items(home: Path) -> None:
    """Attacks resolve()'s loop over ``for_record``: once a reviewer's delete removed the
    record, its other open findings have nothing left to decide; left open they would sit
    in the queue (and its listing) until some later night's sweep."""
    ns = "/users/u-1/facts"
    r = MemoryRecord.model_validate({
        "id": "m-1", "actor_id": "u-1", "namespace": ns, "memory_type": "semantic",
        "content": "Works at the Lisbon office.", "created_at": T0 - timedelta(days=400),
        "subject": "office", "owner": None,
    })  # fmt: skip
    store = SqliteStore(home / "memlife.db")
    store.put_many([r])
    finding = Decision(r.id, r.actor_id, ns, Action.review,
                       [Reason.MISSING_OWNER, Reason.STALE_VERIFICATION], 0.3,
                       content_sha256=r.sha256, priority=1.0, memory_type="semantic")  # fmt: skip
    ReviewQueue.for_store(store).queue([finding], budget=10, run_id="night-1", at=T0)
    asked = item_id(r.id, "MISSING_OWNER", "u-1", ns)
    other = item_id(r.id, "STALE_VERIFICATION", "u-1", ns)
    queue = ReviewQueue.for_store(store)
    assert {i.item_id for i in queue.list()} == {asked, other}

    summary = resolve(store, asked, "delete", "eve@example.com", now=T0 + timedelta(hours=1))

    assert store.get(r.id) is None
    done, closed = queue.get(asked), queue.get(other)
    assert done is not None and done.state == "resolved"
    assert closed is not None and (closed.state, closed.decision) == ("resolved", "delete")
    assert closed.operation_id == done.operation_id is not None  # the delete that removed it
    assert queue.list() == []
    assert summary["item"]["state"] == "resolved"
    store.close()


# -- 2. online/compaction.py _round_cuts: at least keep_last_turns tool rounds stay --------
def _agent_loop(rounds: int) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [{"role": "user", "content": "Audit every file."}]
    for i in range(rounds):
        history.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": f"t{i}", "name": "read", "input": {"path": f"f{i}.py"}},
        ]})  # fmt: skip
        history.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"t{i}", "content": f"{i}" * 4000},
        ]})  # fmt: skip
    history.append({"role": "assistant", "content": "Done: nothing to report."})
    return history


class _Fixed:
    def summarize(self, messages: Sequence[Mapping[str, Any]]) -> str:
        return "Read the older files; nothing notable."


def test_an_agent_loop_keeps_at_least_keep_last_turns_rounds_even_over_budget() -> None:
    """Attacks the slice in _round_cuts (``len(cuts) - keep + 1``): with a budget no cut
    can meet, the farthest allowed cut is taken; it must still leave the newest
    ``keep_last_turns`` tool rounds verbatim (one more and the agent loses a result it
    is still working from)."""
    history, keep = _agent_loop(6), 3
    result = compact(history, budget_tokens=1_500, keep_last_turns=keep, summarizer=_Fixed())
    assert result.compacted and result.reason == "over_budget", result
    assert validate_history(result.messages, allow_pending_tool_use=True) == []
    # a round begins at an assistant message answering tool results (the final answer is
    # the newest): the 3 newest are t4 + its result, t5 + its result, the answer
    kept = 2 * keep - 1
    assert result.messages[1:] == history[-kept:]  # after the request with the summary
    assert result.messages[0]["content"][0] == {"type": "text", "text": history[0]["content"]}
    assert result.summarized_rounds == 4  # t0..t3


# -- 3. policy.py: out-of-range values refused with the key named ---------------------------
def _policy_with(tmp_path: Path, section: str, key: str, value: object) -> Path:
    data = yaml.safe_load(Path("policies/default.yaml").read_text())
    data[section][key] = value
    p = tmp_path / "policy.yaml"
    p.write_text(yaml.safe_dump(data))
    return p


def test_a_negative_review_budget_is_refused_naming_the_key(home: Path, tmp_path: Path) -> None:
    """Attacks ReviewPolicy.nightly_budget's ``ge=0``: -1 would open no item and, spent
    minus by_run, make every night's room 0 without a word."""
    with pytest.raises(PolicyError, match=r"review\.nightly_budget"):
        load_policy(_policy_with(tmp_path, "review", "nightly_budget", -1))
    load_policy(_policy_with(tmp_path, "review", "nightly_budget", 0))  # 0: review nothing


def test_zero_gate_replicas_is_refused_naming_the_key(home: Path, tmp_path: Path) -> None:
    """Attacks GatePolicy.replicas' ``ge=1``: 0 replicas evaluate no case at all."""
    with pytest.raises(PolicyError, match=r"gate\.replicas"):
        load_policy(_policy_with(tmp_path, "gate", "replicas", 0))
    assert load_policy(_policy_with(tmp_path, "gate", "replicas", 1)).gate.replicas == 1


# -- 4. online/memory.py recall: each hit re-read, only ACTIVE ones returned ----------------
@pytest.fixture()
def agentcore_memory(tmp_path: Path) -> Iterator[tuple[LongTermMemory, Any]]:
    """Long-term memory over the AgentCore adapter: a store with no cheap change signal,
    so a loaded shard is trusted for ``refresh_seconds``."""
    from tests.fakes.agentcore import AgentCoreHarness

    harness = AgentCoreHarness()
    try:
        store = harness.store()
        memory = LongTermMemory(store, ledger=AccessLedger(tmp_path / "ledger"))
        yield memory, store
        memory.close()
    finally:
        harness.close()


def test_recall_never_returns_a_record_superseded_behind_a_loaded_shard(
    agentcore_memory: tuple[LongTermMemory, Any],
) -> None:
    """Attacks recall's status re-check of each hit: the shard index (loaded before a
    nightly run superseded the record, refreshed only after ``refresh_seconds``) still
    ranks it; only the re-read keeps a superseded record out of recall (DESIGN: only
    ``active`` records are ever returned)."""
    memory, store = agentcore_memory
    ns = "/users/u-1/drinks"
    old = memory.remember("u-1", ns, "drinks", "Drinks black coffee every morning.").record_id
    new = memory.remember("u-1", ns, "drinks", "Switched to green tea in the mornings.").record_id
    assert old in {h.record.id for h in memory.recall("u-1", "coffee in the morning", k=5)}
    # another process (the nightly run) supersedes the old statement
    store.set_status([old], Status.superseded, replaced_by=new)
    hits = memory.recall("u-1", "coffee in the morning", k=5)
    assert old not in {h.record.id for h in hits}
    assert {h.record.id for h in hits} <= {new}
    assert all(h.record.status is Status.active for h in hits)


# -- 5. apply/groups.py withheld_by_gate: no model call for a group the gate will withhold --
def test_an_apply_run_without_an_eval_set_sends_no_enforced_group_to_the_model(
    home: Path, monkeypatch: pytest.MonkeyPatch, messages_server: MessagesServer
) -> None:
    """Attacks withheld_by_gate: without an evaluation set (gate required) a consolidation
    in an enforced namespace is withheld before anything is read or sent, night after
    night; commit_run's own withholding (run_commit.ungated) would keep the store as it is
    but only after paying a model call per group, every night."""
    from memlife.pipeline import RunConfig, run_local
    from tests.support.gate import NOW, rec

    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", messages_server.base_url)
    monkeypatch.delenv("MEMLIFE_EVAL_CASES", raising=False)
    tea = rec("m-tea", "preferences", "Drinks only green tea, never coffee.", subject="beverage",
              age=300)  # fmt: skip
    coffee = rec("m-coffee", "preferences",
                 "Switched to black coffee every morning; no longer drinks tea.",
                 subject="beverage", age=20)  # fmt: skip
    store = SqliteStore(home / "memlife.db")
    store.put_many([tea, coffee])
    store.close()

    summary = run_local(RunConfig(dry_run=False, now=NOW))

    assert messages_server.message_requests == []  # nothing sent for a withheld group
    assert summary.gate is not None and summary.gate["configured"] is False
    assert summary.gate["withheld_groups"] == 1
    assert summary.lifecycle["consolidated"] == summary.lifecycle["superseded"] == 0
    store = SqliteStore(home / "memlife.db")
    try:
        assert {r.id: r.status for r in store.iter_all()} == {
            "m-tea": Status.active, "m-coffee": Status.active,
        }  # fmt: skip
    finally:
        store.close()
