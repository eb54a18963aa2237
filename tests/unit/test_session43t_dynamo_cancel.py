"""Audit 43t (session 43): a DynamoDB transaction cancelled for provisioned throughput.

DynamoDB names a transaction cancelled on a provisioned table (or GSI) whose capacity ran
out with the reason code ``ProvisionedThroughputExceeded`` (botocore's service model,
TransactionCanceledException), not ``ThrottlingError`` (on-demand tables). Since 43s a
cancellation is a refused condition only for ``ConditionalCheckFailed`` reasons: any other
raises, and is retried only when ``is_throttling`` reads it as throttling."""

from __future__ import annotations

import pytest

from tests.unit.test_dynamo_transactions_session43 import cancel_next_transaction
from tests.unit.test_guards_session35 import NS


def test_a_transaction_cancelled_for_provisioned_throughput_is_throttling() -> None:
    """The journal's APPLIED -> RECEIPTED move (one transaction) is cancelled once by a
    provisioned table out of capacity. It is no refused condition (it raises), so it must
    read as throttling: else the local engine's ``retried`` and the Prefect task do not
    retry the batch and the whole night fails where it used to go on."""
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
        fired = cancel_next_transaction(state, '"op#', "ProvisionedThroughputExceeded")
        with pytest.raises(Exception) as caught:
            journal.transition(op.operation_id, OpState.RECEIPTED)
        assert fired
        assert not isinstance(caught.value, JournalStateError), caught.value
        assert is_throttling(caught.value)
