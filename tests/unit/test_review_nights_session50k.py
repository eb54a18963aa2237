"""Audit 50k (session 50): several nights on real, unlabelled memories with a human in the
loop. LoCoMo's observations are read from ``../shared/data/locomo10.json`` (never copied
here; skipped when absent) and imported as the data README's lifecycle task says (actor =
the sample id, namespace ``/conversations/<sample>/<speaker>``, semantic, agent_inferred,
confidence 0.8, no subject, no owner); the nights and the reviewer run through the real CLI
on the embedded SQLite store, the model (where one is asked) behind the real SDK against
the local Messages API server.

The finding: a reviewer rejects a proposed update ("B probably replaces A": keep A). A
later session restates B word for word, and the night merges B and its restatement into a
replacement R that holds B's very text. The night after, the rejected proposal is back:
"R probably replaces A", a new item for the same two texts (offline), or, with a model
key set, the pair is handed to the model, whose ``update`` supersedes A, the record the
person kept (session 47j's guard compares the pair's record id only).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.consolidate.prompts import TOOL_NAME
from memlife.stores.sqlite import SqliteStore
from tests.fakes.messages_api import MessagesServer, Reply, tool_use_reply
from tests.support.cli import invoke
from tests.unit.test_locomo_model_nights_session47 import RECORD

LOCOMO = Path(__file__).parents[3] / "shared" / "data" / "locomo10.json"
# a reviewer's decision stamps the wall clock: the nights run from tomorrow on
NIGHT1 = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
SAMPLE, NS = "conv-49", "/conversations/conv-49/sam"
# Sam's check-up (session 2) and his friends mocking his weight (session 4): the night reads
# the second as a probable update of the first; it is not one (a person keeps both)
OLDER, NEWER = "conv-49-s2-sam-000", "conv-49-s4-sam-000"
RESTATED = "conv-49-s26-sam-000"  # a later session saying NEWER's words again

pytestmark = pytest.mark.skipif(not LOCOMO.exists(), reason="LoCoMo data not present")


def observations(*ids: str) -> dict[str, dict[str, Any]]:
    """The lifecycle task's lines for these observation ids of conv-49."""
    raw = next(r for r in json.loads(LOCOMO.read_text()) if r["sample_id"] == SAMPLE)
    out = {}
    for key, session in raw["observation"].items():
        n = key.split("_")[1]
        at = datetime.strptime(raw["conversation"][f"session_{n}_date_time"],
                               "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)  # fmt: skip
        for speaker, facts in session.items():
            for i, (text, _ids) in enumerate(facts):
                rid = f"{SAMPLE}-s{n}-{speaker.lower()}-{i:03d}"
                if rid in ids:
                    out[rid] = {
                        "id": rid, "actor_id": SAMPLE, "namespace": NS, "memory_type": "semantic",
                        "content": text, "created_at": at.isoformat().replace("+00:00", "Z"),
                        "source": "agent_inferred", "confidence": 0.8,
                    }  # fmt: skip
    assert set(out) == set(ids)
    return out


def ok(*args: str) -> str:
    code, out, err = invoke(*args)
    assert code == 0, (args, out, err)
    return out


def load(home: Path, name: str, lines: list[dict[str, Any]]) -> None:
    home.mkdir(parents=True, exist_ok=True)
    src = home / name
    src.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert json.loads(ok("import", str(src), "--json"))["imported"] == len(lines)


def night(day: int) -> dict[str, Any]:
    now = (NIGHT1 + timedelta(days=day)).isoformat()
    return json.loads(
        ok("run", "--engine", "local", "--now", now, "--allow-future-cutoff", "--json")
    )


def open_items() -> list[dict[str, Any]]:
    return [i for i in json.loads(ok("review", "list", "--json")) if i["state"] == "open"]


def status(home: Path, rid: str) -> str:
    with SqliteStore(home / "memlife.db") as s:
        got = s.get(rid)
        assert got is not None
        return str(got.status)


def kept_pair_then_restated(home: Path, *, restate: bool = True) -> str:
    """Night 1 asks whether NEWER replaces OLDER; a reviewer keeps OLDER. The next session
    restates NEWER word for word (``restate``), and night 2 merges the two into one
    replacement holding NEWER's text. Returns the replacement's id (or NEWER's)."""
    lines = observations(OLDER, NEWER)
    load(home, "night1.jsonl", list(lines.values()))
    night(0)
    (item,) = open_items()
    assert (item["record_id"], item["pair_id"]) == (OLDER, NEWER)
    ok("review", "resolve", item["item_id"], "--decision", "keep", "--reviewer", "ops-ann")
    if not restate:
        night(1)
        return NEWER
    again = {**lines[NEWER], "id": RESTATED, "created_at": "2024-01-20T10:00:00Z"}
    load(home, "night2.jsonl", [again])
    life = night(1)["lifecycle"]
    assert (life["consolidated"], life["superseded"]) == (1, 2), life
    with SqliteStore(home / "memlife.db") as s:
        new, old = s.get(NEWER), s.get(RESTATED)
        assert new is not None and old is not None
        assert new.provenance.replaced_by == old.provenance.replaced_by is not None
        replacement = s.get(new.provenance.replaced_by)
        assert replacement is not None and replacement.content == new.content
        return replacement.id


def test_a_kept_pair_is_not_proposed_again_through_the_merge_of_its_newer_record(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reviewer answered "NEWER does not replace OLDER". The replacement of NEWER and
    its word-for-word restatement says exactly NEWER's text: pairing OLDER with it asks the
    person the question they answered. Observed on four conversations' nights: night 5
    reopened the item (``review_asked_again``) with nothing changed but the merge."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    kept_pair_then_restated(home)
    counts = night(2)["other_counts"]
    assert open_items() == [], "the rejected proposal is asked again"
    assert counts.get("review_asked_again", 0) == 0
    assert status(home, OLDER) == "active"


def test_control_a_kept_pair_stays_answered_while_its_records_stay(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Control: without the restatement, the answered pair stays answered night after
    night (counted closed earlier, never reopened)."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    kept_pair_then_restated(home, restate=False)
    counts = night(2)["other_counts"]
    assert open_items() == []
    assert counts.get("review_closed_earlier") == 1


def replies(body: dict[str, Any]) -> Reply:
    """A model that calls identical texts duplicates and anything else an update that
    retires the older record(s), naming every record it was sent."""
    recs = [(rid, text) for _, rid, text in RECORD.findall(body["messages"][0]["content"])]
    ids, newest = [rid for rid, _ in recs], recs[-1][1]
    same = len({text for _, text in recs}) == 1
    out: dict[str, Any] = {"summary": newest, "claims": [newest], "confidence": 0.9,
                           "source_ids": ids, "relation": "duplicate" if same else "update"}  # fmt: skip
    if not same:
        out |= {"source_ids": ids[-1:], "outdated_ids": ids[:-1]}
    return tool_use_reply(TOOL_NAME, out)


def test_a_kept_record_is_not_handed_to_the_model_through_its_pairs_replacement(
    home: Path, monkeypatch: pytest.MonkeyPatch, messages_server: MessagesServer
) -> None:
    """Session 47j: a pair a reviewer answered is not handed to the model. Once the newer
    record is merged with its restatement, the pair is (OLDER, replacement) by id, so the
    model was asked, and its `update` superseded OLDER, the record the person kept."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    replacement = kept_pair_then_restated(home)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-fake")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", messages_server.base_url)
    messages_server.set_handler(replies)
    night(2)
    assert status(home, OLDER) == "active", "the model overruled the reviewer's keep"
    assert status(home, replacement) == "active"
