"""No memory content in Prefect's states and logs when a library fails with data in its
message (memlife/foreign_errors.py), on a real Prefect test server."""

from __future__ import annotations

import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import botocore.exceptions
import pytest

from memlife import fanout
from memlife.errors import InputError
from memlife.foreign_errors import ForeignError, content_free
from memlife.model import MemoryRecord
from memlife.stores.sqlite import SqliteStore

ANCHOR = datetime(2026, 11, 1, tzinfo=UTC)
SECRET = "Diagnosed with hepatitis C in March"


def quote_the_content() -> None:
    """What pydantic does with a bad value (content mapped into a number's column, say):
    quotes it."""
    MemoryRecord.model_validate(
        {"id": "m-1", "actor_id": "u-1", "namespace": "/users/u-1/facts",
         "memory_type": "semantic", "content": "x", "confidence": SECRET,
         "created_at": ANCHOR}
    )  # fmt: skip


def test_a_librarys_message_is_withheld_and_its_type_and_place_kept() -> None:
    with pytest.raises(Exception) as raw:
        quote_the_content()
    assert SECRET in str(raw.value)  # why the boundary exists
    with pytest.raises(ForeignError) as caught:
        content_free(quote_the_content)()
    err = caught.value
    printed = "".join(traceback.format_exception(err))
    assert SECRET not in printed and SECRET not in repr(err)
    assert err.code == "ValidationError" and "pydantic_core" in err.kind
    assert "in quote_the_content" in str(err)  # where it was raised
    assert err.__cause__ is None and err.__context__ is None


def test_memlifes_own_errors_pass_and_throttling_is_still_retried() -> None:
    own = InputError("record m-1: field created_at: not a date")

    def ours() -> None:
        raise own

    with pytest.raises(InputError) as caught:
        content_free(ours)()
    assert caught.value is own

    def throttled() -> None:
        raise botocore.exceptions.ClientError(
            {"Error": {"Code": "ThrottlingException", "Message": SECRET}}, "PutObject"
        )

    with pytest.raises(ForeignError) as wrapped:
        content_free(throttled)()
    assert wrapped.value.code == "THROTTLED" and fanout.is_throttling(wrapped.value)
    assert SECRET not in "".join(traceback.format_exception(wrapped.value))


def _prefect_texts() -> list[str]:
    """Every state message and log line the Prefect server holds."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:
        runs: list[Any] = [*client.read_task_runs(), *client.read_flow_runs()]
        texts = [str(r.state.message or "") for r in runs if r.state is not None]
        texts += [str(r.state.data or "") for r in runs if r.state is not None]
        texts += [log.message for log in client.read_logs()]
    return texts


def test_a_batch_failing_with_content_in_its_message_leaves_none_in_prefect(
    home: Path, prefect_harness: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shard batch task fails with pydantic's message quoting a record's content: the run
    goes on (the shard is reported failed by type), and neither the task's state, nor the
    flow's, nor any log line holds the content."""
    from flows.nightly import nightly
    from memlife import run_planning

    home.mkdir(parents=True, exist_ok=True)
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([MemoryRecord(id="m-1", actor_id="u-1", namespace="/users/u-1/facts",
                                     memory_type="semantic", content="Likes tea.",
                                     created_at=ANCHOR)])  # fmt: skip

    def plan_shard(*args: Any, **kwargs: Any) -> Any:  # a library fails mid-batch
        quote_the_content()

    monkeypatch.setattr(run_planning, "plan_shard", plan_shard)
    result = nightly({"dry_run": True, "now": ANCHOR.isoformat()})
    assert result["failed_shards"] == [{"shard": "u-1:/users/u-1/facts", "actor_id": "u-1",
                                        "namespace": "/users/u-1/facts", "code": "ValidationError"}]  # fmt: skip
    texts = _prefect_texts()
    deadline = time.monotonic() + 60  # task states reach the server as events, a bit later
    while not any("ValidationError" in t for t in texts) and time.monotonic() < deadline:
        time.sleep(0.5)
        texts = _prefect_texts()
    assert any("ValidationError" in t for t in texts)  # the failure is there, by type
    assert not [t for t in texts if SECRET in t]


@pytest.mark.parametrize(
    "text",
    [
        f"- id: a\n  query: {SECRET}: what year\n",  # a colon inside an unquoted scalar
        f"- id: a\n  query: '{SECRET}\n",  # an unclosed quote
        f"cases:\n- id: a\n\tquery: {SECRET}\n",  # a tab
        # valid YAML, refused cases (review of session 20): a target of unknown shape, and
        # a value pasted where a key goes
        f"- id: a\n  query: what\n  actor_id: u-1\n  must_retrieve:\n  - facts: {SECRET}\n",
        f"- id: a\n  query: what\n  actor_id: u-1\n  must_retrieve: [m-1]\n  {SECRET}: yes\n",
    ],
)
def test_a_malformed_evaluation_set_is_named_by_line_not_by_its_text(
    tmp_path: Path, text: str
) -> None:
    """PyYAML's message quotes the offending line, and an evaluation set holds memory
    content (queries, expected facts): the error, which reaches logs and Prefect's state
    through the run's start, gives the problem, line and column only."""
    from memlife.evalset import EvalSetError, load_cases

    path = tmp_path / "cases.yaml"
    path.write_text(text)
    with pytest.raises(EvalSetError) as caught:
        load_cases(path)
    message = str(caught.value)
    assert SECRET not in message and "hepatitis" not in message
    assert message.startswith(str(path))  # the file named, the problem said
    assert ("line " in message and "column " in message) == ("must_retrieve" not in text)


def test_an_agentcore_refusal_quoting_the_request_is_not_repeated() -> None:
    """AgentCore's validation messages quote what was sent ("Value '...' at 'content.text'
    failed to satisfy constraint"); the store error memlife raises (its own, so passed
    through to logs and Prefect) keeps the operation and the code, not that message. An
    access refusal's message, which names no data, is kept."""
    from memlife.stores.agentcore.errors import store_error

    refused = botocore.exceptions.ClientError(
        {"Error": {"Code": "ValidationException", "Message":
                   f"1 validation error detected: Value '{SECRET}' at "
                   "'memoryRecords.1.member.content.text' failed to satisfy constraint"}},
        "BatchCreateMemoryRecords",
    )  # fmt: skip
    err = store_error(refused, "BatchCreateMemoryRecords")
    assert SECRET not in str(err) and err.code == "VALIDATION"
    assert "BatchCreateMemoryRecords: ValidationException" in str(err)
    denied = botocore.exceptions.ClientError(
        {"Error": {"Code": "AccessDeniedException", "Message": "not authorized on memory m-1"}},
        "ListMemoryRecords",
    )
    assert "not authorized on memory m-1" in str(store_error(denied, "ListMemoryRecords"))
