"""A message-shaped 200 whose fields have the wrong type (audit 43n).

The SDK builds a ``Message`` from any JSON without checking field types. A gateway or
proxy that mangles one (``usage`` counts as NaN, strings or objects, a numeric ``model``,
a list as ``stop_reason``) must cost the group at most its answer: never a bare
ValueError/TypeError out of the consolidator, which ends the whole night (another
actor's hard expiry not done) and, the proxy being the same tomorrow, every night.
Real SDK against the local Messages API server, real MiniLM, real SQLite store.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.consolidate.prompts import TOOL_NAME
from memlife.model import Status
from memlife.pipeline import RunConfig, run_local
from tests.fakes.messages_api import raw_reply
from tests.unit.test_consolidation_adversarial import (  # noqa: F401  (run_env: a fixture)
    COFFEE,
    NIGHT,
    PAIR,
    T0,
    _make,
    _seed,
    _state,
    emb,
    rec,
    run_env,
)

ANSWER = {"summary": COFFEE, "claims": [COFFEE], "confidence": 0.9, "source_ids": ["b-1", "b-2"]}


def body(**fields: Any) -> str:
    """A tool_use message answering PAIR faithfully, with ``fields`` put over its own."""
    msg: dict[str, Any] = {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
        "content": [{"type": "tool_use", "id": "tu_1", "name": TOOL_NAME, "input": ANSWER}],
        "stop_reason": "tool_use", "stop_sequence": None,
        "usage": {"input_tokens": 300, "output_tokens": 40},
    }  # fmt: skip
    return json.dumps({**msg, **fields})  # NaN and Infinity as Python's json writes them


@pytest.mark.parametrize(
    "usage",
    [
        {"input_tokens": float("nan"), "output_tokens": 40},
        {"input_tokens": float("inf"), "output_tokens": 40},
        {"input_tokens": "many", "output_tokens": 40},
        {"input_tokens": {"n": 1}, "output_tokens": 40},
        {"input_tokens": 300, "output_tokens": -7000},
    ],
    ids=["nan", "infinity", "text", "object", "negative"],
)
def test_a_usage_count_that_is_no_count_reads_as_missing(messages_server, emb, usage) -> None:  # noqa: F811
    """The proxy sends the model's good answer with a mangled ``usage``. The answer stands,
    its tokens estimated as for a message without usage: no crash, and no count below 0
    (a negative one would subtract from the night's model figures)."""
    messages_server.enqueue(raw_reply(body(usage=usage)))
    c = _make(messages_server, emb)
    result = c.consolidate(PAIR)
    assert result.input_tokens > 0 and result.output_tokens >= 0
    assert c.usage.output_tokens >= 0


@pytest.mark.parametrize(
    "fields",
    [
        {"usage": {"input_tokens": float("nan"), "output_tokens": 40}},
        {"model": 123},
        {"stop_reason": ["tool_use"]},
    ],
    ids=["usage-nan", "model-number", "stop-reason-list"],
)
def test_a_mangled_message_never_ends_the_night(run_env: Path, messages_server, fields) -> None:  # noqa: F811
    """Every night the proxy mangles the model's answer the same way. The night must still
    end: the other actor's expired record is deleted, the pair is either left alone or
    merged into an active replacement, and the run writes its receipt."""
    expired = rec("e-1", "Old event.", 1, subject="ev", actor="u-2", ns="facts",
                  expires_at=T0 + timedelta(days=2))  # fmt: skip
    _seed(run_env, [rec("b-1", COFFEE, 1), rec("b-2", COFFEE, 6), expired])
    messages_server.set_handler(lambda _: raw_reply(body(**fields)))
    summary = run_local(RunConfig(dry_run=False, now=NIGHT))
    receipt = json.loads(Path(str(summary.receipt)).read_text())
    assert receipt["status"] in ("success", "partial_failure")
    state = _state(run_env)
    assert "e-1" not in state  # the other actor's hard expiry went ahead
    for rid in ("b-1", "b-2"):
        r = state[rid]
        assert r.status is Status.active or (
            r.status is Status.superseded
            and state[str(r.provenance.replaced_by)].status is Status.active
        )
