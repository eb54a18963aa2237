"""Session 47 (audit 47j): LoCoMo observations saved as an agent saves them (shared/data
README, "The lifecycle task": actor = sample id, namespace ``/conversations/<sample>/<speaker>``,
semantic, agent_inferred, confidence 0.8, no subject, no owner) over several nights, through
the real CLI on the embedded SQLite store, with the consolidation model behind the real SDK
(the local Messages API server) where a night asks one.

The observations are quoted from LoCoMo (CC BY-NC 4.0) for evaluation only.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.consolidate.prompts import TOOL_NAME
from memlife.stores.sqlite import SqliteStore
from tests.fakes.messages_api import MessagesServer, Reply, tool_use_reply
from tests.support.cli import invoke

# a reviewer's decision stamps the wall clock: the nights run from tomorrow on
NIGHT1 = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
OUTCOMES = ("retained", "consolidated", "superseded", "deleted", "quarantined", "reviewed",
            "held", "failed")  # fmt: skip
NS = "/conversations/conv-49/sam"
OLDER, NEWER, OTHER = "conv-49-s20-sam-000", "conv-49-s22-sam-000", "conv-49-s1-sam-001"
SAM = [
    (OLDER, "Sam used to love hiking but hasn't had the chance to do it recently.",
     "2023-12-17T18:48:00Z"),
    (NEWER, "Sam recently took friends on an epic hiking trip.", "2023-12-31T11:00:00Z"),
]  # fmt: skip
RECORD = re.compile(r'<(memory_\w+) id="([^"]+)"[^>]*>\n(.*?)\n</\1>', re.S)


def ok(*args: str) -> str:
    code, out, err = invoke(*args)
    assert code == 0, (args, out, err)
    return out


def seed(home: Path, rows: list[tuple[str, str, str]]) -> None:
    """Each row one LoCoMo observation of Sam's, imported as the lifecycle task says."""
    home.mkdir(parents=True, exist_ok=True)
    src = home / "observations.jsonl"
    src.write_text("".join(json.dumps({
        "id": rid, "actor_id": "conv-49", "namespace": NS, "memory_type": "semantic",
        "content": text, "created_at": at, "source": "agent_inferred", "confidence": 0.8,
    }) + "\n" for rid, text, at in rows))  # fmt: skip
    assert json.loads(ok("import", str(src), "--json"))["imported"] == len(rows)


def night(now: datetime) -> dict[str, Any]:
    args = ("run", "--engine", "local", "--now", now.isoformat(), "--allow-future-cutoff")
    return json.loads(ok(*args, "--json"))


def with_model(monkeypatch: pytest.MonkeyPatch, server: MessagesServer) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-fake")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)


def answer(relation: str, summary: str | None = None) -> Any:
    """A model that names every record it was sent; ``update`` retires all but the newest."""

    def reply(body: dict[str, Any]) -> Reply:
        recs = [(rid, text) for _, rid, text in RECORD.findall(body["messages"][0]["content"])]
        ids, newest = [rid for rid, _ in recs], recs[-1][1]
        out: dict[str, Any] = {"summary": summary or newest, "claims": [summary or newest],
                               "confidence": 0.9, "source_ids": ids, "relation": relation}  # fmt: skip
        if relation == "update":
            out |= {"source_ids": ids[-1:], "outdated_ids": ids[:-1]}
        return tool_use_reply(TOOL_NAME, out)

    return reply


def status(home: Path, rid: str) -> str:
    with SqliteStore(home / "memlife.db") as s:
        got = s.get(rid)
        assert got is not None
        return str(got.status)


@pytest.mark.parametrize("decision", ["keep", "verify", "dispute"])
def test_a_pair_a_reviewer_answered_is_not_handed_to_the_model(
    home: Path, monkeypatch: pytest.MonkeyPatch, messages_server: MessagesServer, decision: str
) -> None:
    """The operator runs the first night offline: Sam's two observations are one
    POSSIBLE_UPDATE item. A reviewer answers it (keep: the older one stays true; verify; or
    dispute: never to be removed until the dispute is resolved). The operator then sets a
    model key. The next night hands the same pair, unchanged, to the model, whose `update`
    supersedes the record the person kept and closes a dispute as `superseded`. Must hold:
    a reviewer's answer for this content stands; the older record stays active."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    seed(home, SAM)
    night(NIGHT1)
    (item,) = json.loads(ok("review", "list", "--json"))
    assert (item["record_id"], item["pair_id"]) == (OLDER, NEWER)
    ok("review", "resolve", item["item_id"], "--decision", decision, "--reviewer", "audit")
    with_model(monkeypatch, messages_server)
    messages_server.set_handler(answer("update"))
    night(NIGHT1 + timedelta(days=1))
    assert status(home, OLDER) == "active"
    assert messages_server.message_requests == []


@pytest.mark.parametrize(
    "reply",
    [answer("complement"), answer("duplicate", "Sam hikes with his wife in Peru every weekend.")],
    ids=["kept-apart", "refused"],
)
def test_records_the_model_leaves_as_they_are_land_in_an_outcome(
    home: Path, monkeypatch: pytest.MonkeyPatch, messages_server: MessagesServer, reply: Any
) -> None:
    """With a model configured, Sam's probable update goes to the model (no review item).
    The model says `complement` (both stay true), or answers with an invented detail that
    grounding refuses: either way both records stay exactly as they were. The night's
    summary must still place every processed record in one outcome (retained), on the first
    night and on the unchanged second one; it placed the pair in none (processed 3, the
    outcomes summing to 1)."""
    seed(
        home,
        [
            *SAM,
            (OTHER, "Sam is considering trying painting as a new hobby.", "2023-05-18T13:47:00Z"),
        ],
    )
    with_model(monkeypatch, messages_server)
    messages_server.set_handler(reply)
    for n in range(2):
        life = night(NIGHT1 + timedelta(days=n))["lifecycle"]
        assert [status(home, r) for r in (OLDER, NEWER, OTHER)] == ["active"] * 3
        assert life["processed"] == 3 == sum(life[k] for k in OUTCOMES), life
