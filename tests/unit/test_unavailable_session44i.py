"""Audit 44i (session 44): a retryable failure counted against its group (memlife/apply/unavailable.py).

The rule (docs/adversarial-review.md, Left): a group's retryable failure counts against it
only where the service answered another call of the same batch; an outage blames none.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from memlife.pipeline import RunConfig, run_local
from tests.fakes.messages_api import Reply
from tests.unit.test_consolidation_adversarial import (  # noqa: F401  (run_env: a fixture)
    NIGHT,
    RECORD,
    _answer,
    _seed,
    rec,
    run_env,
)
from tests.unit.test_model_unavailable_alone import _down


def test_an_outage_starting_in_a_later_batch_blames_no_group(
    run_env: Path,  # noqa: F811 (the imported fixture)
    messages_server,
) -> None:
    """The adversary (an outage) lets the service answer the run's first request, in the
    first batch, and fails every later one: the other actor's group, alone in its batch,
    met an outage there (nothing of its batch was answered) and must not be blamed."""
    _seed(run_env, [rec("c-1", "I drink black coffee every morning.", 1),
                    rec("c-2", "Every morning I drink black coffee.", 3),
                    rec("t-1", "I drink green tea every evening.", 1, subject="tea", actor="u-2"),
                    rec("t-2", "Every evening I drink green tea.", 3, subject="tea", actor="u-2")])  # fmt: skip
    calls = itertools.count()

    def first_then_down(body: dict[str, Any]) -> Reply:
        if next(calls):
            return _down()
        records = {rid: c for _, rid, c in RECORD.findall(body["messages"][0]["content"])}
        return _answer(records[sorted(records)[-1]], sorted(records), relation="duplicate")

    messages_server.set_handler(first_then_down)
    summary = run_local(RunConfig(dry_run=False, now=NIGHT, shards_per_batch=1, workers=1))
    # one call per batch; the second batch answered nothing, so one probe (down too)
    sent = [r.body["messages"][0]["content"] for r in messages_server.message_requests]
    assert len(sent) == 3 and sent[2] == "ping"
    assert summary.other.get("consolidation_model_unavailable") == 1
    assert not summary.other.get("consolidation_unavailable_alone")
