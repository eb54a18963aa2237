"""Forty-third audit s: run state on DynamoDB at the service's limits (moto).

DynamoDB cancels a ``TransactWriteItems`` call for more than a refused condition: a
``ThrottlingError`` or a ``TransactionConflict`` (another transaction on one of its items)
cancels it too, with the same ``TransactionCanceledException``; the reasons tell them
apart. botocore does not retry that exception. Moto never throttles, so these tests make
the service's answer at the network boundary (a botocore ``before-call`` hook answers the
one request as DynamoDB would; every other request goes to moto)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse

from memlife import state as state_mod
from memlife.plan import Reason
from memlife.review_queue import ReviewQueue, item_id, resolve
from memlife.review_queue.dynamodb import DynamoReviews
from memlife.state.dynamodb import DynamoState
from tests.support.aws_state import CREDENTIALS, provision, state_url
from tests.unit.test_guards_session35 import NS, POLICY, T0, finding, rec


def cancel_next_transaction(
    state: DynamoState, touching: str, reason: str = "ThrottlingError"
) -> list[str]:
    """The state client's next ``TransactWriteItems`` whose request names ``touching`` (a
    key prefix) is cancelled by the service for ``reason`` on its first action (the rest:
    ``None``), as DynamoDB answers a transaction it throttled: nothing of it is written
    (the answer is given in botocore's ``before-call``, so the request never reaches moto).
    Returns the list the hook notes its firing in."""
    fired: list[str] = []

    def answer(params: dict[str, Any], **_: Any) -> tuple[AWSResponse, dict[str, Any]] | None:
        body = params["body"].decode()  # the request as serialised for the service
        if fired or touching not in body:
            return None
        fired.append(reason)
        reasons = [{"Code": reason, "Message": "Throughput exceeds the current capacity"}]
        reasons += [{"Code": "None"}] * (len(json.loads(body)["TransactItems"]) - 1)
        codes = ", ".join(r["Code"] for r in reasons)
        parsed = {
            "Error": {"Code": "TransactionCanceledException",
                      "Message": "Transaction cancelled, please refer cancellation reasons "
                                 f"for specific reasons [{codes}]"},
            "CancellationReasons": reasons,
            "ResponseMetadata": {"HTTPStatusCode": 400},
        }  # fmt: skip
        return AWSResponse("https://dynamodb.us-east-1.amazonaws.com/", 400, {}, None), parsed

    state.ddb.meta.events.register_first("before-call.dynamodb.TransactWriteItems", answer)
    return fired


@pytest.fixture()
def agentcore(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, DynamoState]]:
    """An AgentCore store (the fake) with its run state in a DynamoDB table (moto)."""
    from tests.fakes.agentcore import agentcore_store

    for k, v in CREDENTIALS.items():
        monkeypatch.setenv(k, v)
    with agentcore_store() as (store, _fake):
        url = state_url()
        state = provision(url)
        monkeypatch.setenv("MEMLIFE_STATE", url)
        monkeypatch.setattr(state_mod, "_open", {url: state})
        yield store, state


def test_a_dispute_whose_close_is_throttled_is_not_reported_done(agentcore, home) -> None:
    """ana disputes m-1's item; the close's transaction (item + dispute marker) is
    throttled by DynamoDB once. ``DynamoReviews.close`` reads the cancellation as "resolved
    by someone else" and returns False, which resolve ignores: resolve reports success, the
    item stays open and no marker protects the record (the night reads the markers).
    Must hold: the resolve fails clearly, or the item ends disputed with its marker."""
    store, state = agentcore
    store.put_many([rec("m-1")])
    m1 = store.get("m-1")
    queue = ReviewQueue.for_store(store)
    assert isinstance(queue.backend, DynamoReviews)
    queue.queue([finding(m1, Reason.MISSING_OWNER)], budget=10, run_id="night-1", at=T0)
    iid = item_id("m-1", "MISSING_OWNER", "u-1", NS)
    fired = cancel_next_transaction(state, '"rv#')  # the close: the item and its marker
    try:
        resolve(store, iid, "dispute", "ana@example.com", now=T0 + timedelta(hours=1),
                policy=POLICY, receipts=f"file://{home}/receipts")  # fmt: skip
    except Exception as exc:  # a clear failure is an answer: the reviewer can ask again
        assert "Throttling" in str(exc) or "TransactionCanceled" in type(exc).__name__ + str(exc)
        return
    assert fired, "the close's transaction was never sent"
    item = queue.get(iid)
    assert item is not None and item.state == "disputed"
    assert queue.disputed("u-1", NS) == frozenset({"m-1"})


def test_a_throttled_receipt_transaction_is_throttling_not_another_writer() -> None:
    """The journal's APPLIED -> RECEIPTED move is one transaction (the operation and its
    memberships, with their TTL). DynamoDB throttles it once. Must hold: the error is read
    as throttling (the local engine's ``retried`` and the Prefect task retry the batch),
    not as a second writer (a bug, never retried: the whole night fails); the operation
    stays APPLIED and the retried move receipts it."""
    from memlife.journal import JournalStateError, Operation, OpKind, OpState, Outcome
    from memlife.journal.base import operation_id
    from memlife.journal.dynamodb import DynamoJournal
    from memlife.throttling import is_throttling
    from tests.support.aws_state import aws_state

    with aws_state("inprocess") as (_, state):
        journal = DynamoJournal(state)
        (op,) = journal.plan([Operation(
            operation_id=operation_id("run-1", OpKind.delete, ["m-1"]), run_id="run-1",
            kind=OpKind.delete, actor_id="u-1", namespace=NS, record_id="m-1",
            reasons=["HARD_EXPIRED"], policy_version="p1", content_sha256="ab" * 32,
        )])  # fmt: skip
        journal.transition(op.operation_id, OpState.APPLIED, outcome=Outcome.deleted)
        fired = cancel_next_transaction(state, '"op#')
        with pytest.raises(Exception) as caught:
            journal.transition(op.operation_id, OpState.RECEIPTED)
        assert fired
        assert not isinstance(caught.value, JournalStateError), caught.value
        assert is_throttling(caught.value)
        assert journal.get(op.operation_id).state is OpState.APPLIED  # type: ignore[union-attr]
        journal.transition(op.operation_id, OpState.RECEIPTED)  # the retry
        assert journal.get(op.operation_id).state is OpState.RECEIPTED  # type: ignore[union-attr]
