"""Audit 52f: `receipts history` of a record the next night's retry queue deleted.

Night 1 plans the deletion of three hard-expired records; AgentCore fails one delete with a
500 (retryable): night 1 seals the operation FAILED in its dataset file. Night 2's retry
queue deletes the record and writes the operation's receipt (``operations/<op>.json``,
outcome ``deleted``, run id night 1's). Night 2's dataset file holds only night 2's own
operations, so nothing in the dataset ever says the delete happened: `receipts history`
printed "delete failed" as the record's whole history, exit 0, no gap named, while the
record was gone. A reviewer reads "never deleted".

The fake AgentCore (real boto3 over HTTP, moto DynamoDB sidecar) fails the delete, as
test_review_dispute_retry_session51r.py does.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from memlife.audit import open_sink
from memlife.receipts import operation_key
from memlife.receipts_history import record_history
from tests.e2e.test_agentcore_nightly import (  # noqa: F401
    ac,
    apply,
    expired,
    fresh,
    harness,
    home,
    present,
)
from tests.fakes.agentcore import bulk_load
from tests.support.cli import invoke
from tests.support.lifecycle import CUTOFF


def _nights(env: dict[str, Any], fail: bool = True) -> str:
    """Night 1 with one delete failed retryably (when ``fail``), night 2 retrying it; the id."""
    store, fake = env["store"], env["fake"]
    doomed = [expired(i, "u-1") for i in range(3)]
    bulk_load(store, fake, [*doomed, fresh(0, "u-1")])
    rid = doomed[1].id
    if fail:
        fake.fail_next_deletes([rid], 500)
    first = apply(env)
    assert first.status == ("partial_failure" if fail else "success")
    later = apply(env, now=CUTOFF + timedelta(days=1))
    assert later.status == "success" and not present(fake, rid)
    assert later.other.get("retry_queue_deleted") == (1 if fail else None)
    return rid


def test_history_shows_the_delete_the_retry_queue_made(ac: dict) -> None:  # noqa: F811
    rid = _nights(ac)
    gaps: list[dict[str, str]] = []
    rows = record_history(open_sink(ac["sink"]), rid, problems=gaps)
    assert gaps == []
    assert [(r["action"], r["outcome"]) for r in rows][-1] == ("delete", "deleted"), rows


def test_the_cli_history_says_deleted(ac: dict) -> None:  # noqa: F811
    rid = _nights(ac)
    code, out, err = invoke("receipts", "history", rid, "--receipts", ac["sink"], "--json")
    assert code == 0, out + err
    rows = json.loads(out)
    assert rows[-1]["outcome"] == "deleted" and rows[-1]["state"] == "RECEIPTED", rows
    code, out, err = invoke("receipts", "history", rid, "--receipts", ac["sink"])
    assert "deleted" in out, out


def test_control_a_delete_done_the_first_night_is_one_row(ac: dict) -> None:  # noqa: F811
    rid = _nights(ac, fail=False)
    rows = record_history(open_sink(ac["sink"]), rid)
    assert [(r["action"], r["outcome"], r["state"]) for r in rows] == [
        ("delete", "deleted", "RECEIPTED")
    ]


def test_control_a_receipt_rewritten_to_another_record_is_never_its_delete(
    ac: dict,  # noqa: F811
) -> None:
    """The failed row's receipt rewritten to name another record is not read as its
    completion (the history gives the sealed row only; since the fix it also names the
    receipt as evidence it could not read)."""
    rid = _nights(ac)
    sink = open_sink(ac["sink"])
    (row,) = record_history(sink, rid, since=CUTOFF.date(), until=CUTOFF.date())[:1]
    path = ac["receipts"] / operation_key(row["operation_id"])
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, "record_id": "m-other"}))
    rows = record_history(sink, rid)
    assert [r["outcome"] for r in rows] == ["failed"]
    code, out, err = invoke("receipts", "history", rid, "--receipts", ac["sink"])
    assert "deleted" not in out, out
