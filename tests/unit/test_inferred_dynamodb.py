"""Inferred subject keys on the DynamoDB state table, attacked where SQLite has no analogue:
a key and its member-list entry written and deleted in one transaction, so an erasure
racing a `remember`, a writer losing the insert race, and keys written before member lists
existed all leave no key an erasure cannot find (the contract on every backend is in
test_review_state.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memlife.inferred import InferredSubjects
from memlife.inferred.dynamodb import DynamoSubjects, _members
from tests.support.aws_state import aws_state

SHARD = ("a", "/n")


@pytest.fixture(params=["inprocess", "server"])
def dynamo(request, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[DynamoSubjects]:
    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path / "home"))
    with aws_state(request.param) as (_, state):
        yield DynamoSubjects(state)


def _listed(table: DynamoSubjects, subject: str) -> list[str]:
    return [i["sk"]["S"] for i in table.state.query(_members(SHARD, subject))]


def test_an_erasure_racing_a_remember_leaves_no_key_its_list_misses(
    dynamo: DynamoSubjects, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review of session 19: the first form wrote m-9's list entry, then its key; an erasure
    of m-1 (whose words made the key) landing between the two deleted the entry, and m-9
    kept the erased words where no later erasure could find them. Key and entry are now
    written (and deleted) in one transaction, so the erasure lands before or after both."""
    words = "maria adopted grey ~9ccd23"
    dynamo.put("a", "/n", {"m-1": words}, "nightly")
    real = dynamo.state.ddb.transact_write_items
    raced: list[int] = []

    def write(**kw):
        ids = [i.get("Put", {}).get("Item", {}).get("pk", {}).get("S") for i in kw["TransactItems"]]
        if "infs#m-9" in ids and not raced:
            raced.append(dynamo.forget(["m-1"], SHARD) + dynamo.forget_keys(SHARD, {words}))
        return real(**kw)

    monkeypatch.setattr(dynamo.state.ddb, "transact_write_items", write)
    dynamo.put("a", "/n", {"m-9": words}, "remember")  # remember joins m-9 to m-1's group
    assert raced == [1] and dynamo.get(SHARD, ["m-9"]) == {"m-9": words}
    assert _listed(dynamo, words) == ["m-9"]
    assert dynamo.forget_keys(SHARD, {words}) == 1 and dynamo.get(SHARD, ["m-9"]) == {}


def test_a_writer_that_loses_the_insert_race_lists_nothing(dynamo: DynamoSubjects) -> None:
    """The nightly writer read m-6 before remember's key landed: its insert is refused,
    and no entry of its own key is left pointing at m-6."""
    words = "maria adopted grey ~9ccd23"
    dynamo.put("a", "/n", {"m-6": "jazz club ~44aa00"}, "remember")
    dynamo._items = lambda shard, ids: {}  # type: ignore[method-assign]
    dynamo.put("a", "/n", {"m-6": words}, "nightly")
    del dynamo._items
    assert dynamo.get(SHARD, ["m-6"]) == {"m-6": "jazz club ~44aa00"}
    assert _listed(dynamo, words) == [] and _listed(dynamo, "jazz club ~44aa00") == ["m-6"]


def test_a_key_stored_before_member_lists_is_listed_when_next_met(dynamo: DynamoSubjects) -> None:
    """Keys written by the first form have no entry: the next night's put lists them, so
    the erasure of the record whose words made the key finds the others under it."""
    words = "maria adopted grey ~9ccd23"
    for rid in ("m-1", "m-2"):
        item = {"pk": {"S": f"infs#{rid}"}, "sk": {"S": "s"}, "actor_id": {"S": "a"},
                "namespace": {"S": "/n"}, "subject": {"S": words}, "how": {"S": "nightly"},
                "assigned_at": {"S": "2026-11-01T00:00:00+00:00"}}  # fmt: skip
        dynamo.state.ddb.put_item(TableName=dynamo.state.table, Item=item)
    assert _listed(dynamo, words) == []
    dynamo.put("a", "/n", {"m-1": words, "m-2": words}, "nightly")
    assert sorted(_listed(dynamo, words)) == ["m-1", "m-2"]
    table = InferredSubjects(dynamo)
    assert table.forget_removed(SHARD, {"m-1": "maria adopted a grey cat"}) == (1, 1)
    assert table.get(SHARD, ["m-1", "m-2"]) == {} and _listed(dynamo, words) == []


def _count_transactions(dynamo: DynamoSubjects, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each TransactWriteItems call's number of actions, the calls passed on as they are."""
    real = dynamo.state.ddb.transact_write_items
    sizes: list[int] = []

    def write(**kw):
        sizes.append(len(kw["TransactItems"]))
        return real(**kw)

    monkeypatch.setattr(dynamo.state.ddb, "transact_write_items", write)
    return sizes


def test_keys_are_written_and_removed_fifty_records_to_a_transaction(
    dynamo: DynamoSubjects, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One transaction per record cost an erasure 2.6 s for 1,200 records on moto (and a
    first night one transaction per new record); fifty records now share one."""
    words = "maria adopted grey ~9ccd23"
    sizes = _count_transactions(dynamo, monkeypatch)
    dynamo.put("a", "/n", {f"m-{i:03d}": words for i in range(120)}, "nightly")
    assert sizes == [100, 100, 40]
    assert len(_listed(dynamo, words)) == 120
    sizes.clear()
    assert dynamo.forget_keys(SHARD, {words}) == 120
    assert sizes == [100, 100, 40]
    assert _listed(dynamo, words) == [] and dynamo.get(SHARD, ["m-000", "m-119"]) == {}


def test_a_batch_a_changed_record_refuses_is_done_record_by_record(
    dynamo: DynamoSubjects, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One record of the batch took another key meanwhile (its entry under the old key
    still listed): the batch's condition refuses it whole, and record by record the others
    lose the key while that one keeps its new key; its stale entry goes."""
    words = "maria adopted grey ~9ccd23"
    dynamo.put("a", "/n", {f"m-{i}": words for i in range(5)}, "nightly")
    dynamo.state.ddb.update_item(
        TableName=dynamo.state.table, Key={"pk": {"S": "infs#m-2"}, "sk": {"S": "s"}},
        UpdateExpression="SET subject = :s", ExpressionAttributeValues={":s": {"S": "jazz ~1"}},
    )  # fmt: skip
    sizes = _count_transactions(dynamo, monkeypatch)
    assert dynamo.forget_keys(SHARD, {words}) == 4
    assert sizes[0] == 10 and len(sizes) > 1  # refused whole, then one by one
    assert dynamo.get(SHARD, [f"m-{i}" for i in range(5)]) == {"m-2": "jazz ~1"}
    assert _listed(dynamo, words) == []

    # the same on the way in: a record another writer keyed first keeps that key
    dynamo.put("a", "/n", {"m-7": "jazz club ~44aa00"}, "remember")
    dynamo._items = lambda shard, ids: {}  # type: ignore[method-assign]  # read before it landed
    dynamo.put("a", "/n", {f"m-{i}": words for i in (6, 7, 8)}, "nightly")
    del dynamo._items
    assert dynamo.get(SHARD, ["m-6", "m-7", "m-8"]) == {
        "m-6": words, "m-7": "jazz club ~44aa00", "m-8": words
    }  # fmt: skip
    assert sorted(_listed(dynamo, words)) == ["m-6", "m-8"]
