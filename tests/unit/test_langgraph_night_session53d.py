"""Audit 53d: a LangGraph ``put`` over an item a night had merged wrote over the superseded
original, under the id its replacement names as a source.

The night supersedes an item's record by a replacement listing that id in
``provenance.supersedes``. The same key put again afterwards overwrote that superseded row
with the new value (same id, active). The replacement's lineage then named a record saying
something else: erasing the new value took the replacement for one built from it, withdrew
it (a model merge) and reactivated the other source, so the merged fact the user never
erased ("Drinks only green tea.") was gone for good.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("langgraph.store.base")

from memlife import Memory, Status  # noqa: E402
from memlife.erase import erase  # noqa: E402
from memlife.integrations.langgraph import MemlifeStore, record_id  # noqa: E402
from memlife.integrations.langgraph_ids import item_row  # noqa: E402
from memlife.model import Provenance, content_sha256  # noqa: E402
from memlife.stores.base import iter_shard  # noqa: E402

NS, PATH = ("users", "u1", "prefs"), "/users/u1/prefs"
TEA, COFFEE = "Drinks only green tea.", "Never drinks coffee at all."
MERGED = "Drinks only green tea and never coffee."
NEW = "Now likes a flat white at weekends."


@pytest.fixture(name="lg")
def _lg(home: Path) -> Iterator[MemlifeStore]:
    store = MemlifeStore(Memory(f"sqlite:///{home / 'memlife.db'}", ledger=home / "ledger"))
    yield store
    store.memory.close()


def _merged_by_a_night(lg: MemlifeStore) -> tuple[str, str]:
    """What a night's model merge leaves: a replacement naming both records as its sources,
    each superseded by it."""
    lg.put(NS, "drink", {"content": TEA})
    lg.put(NS, "coffee", {"content": COFFEE})
    a, b = record_id("u1", PATH, "drink"), record_id("u1", PATH, "coffee")
    rep = lg.store.get(a).model_copy(
        update={
            "id": "rep-1",
            "content": MERGED,
            "provenance": Provenance(
                supersedes=[a, b], content_sha256=content_sha256(MERGED), policy_version="v1"
            ),
        }
    )
    lg.store.put_many([rep])
    lg.store.set_status([a, b], Status.superseded, replaced_by="rep-1")
    lg.memory.long_term.invalidate()
    return a, b


def _records(lg: MemlifeStore) -> dict[str, tuple[Status, str]]:
    return {
        r.id: (r.status, r.content)
        for page in iter_shard(lg.store, "u1", PATH)
        for r in page.records
    }


def test_a_put_after_a_merge_keeps_the_superseded_original_as_the_night_left_it(
    lg: MemlifeStore,
) -> None:
    a, _ = _merged_by_a_night(lg)
    lg.put(NS, "drink", {"content": NEW})
    original = lg.store.get(a)
    assert original is not None
    assert (original.status, original.content) == (Status.superseded, TEA)
    assert original.provenance.replaced_by == "rep-1"


def test_erasing_the_new_value_leaves_the_nights_merge_alone(lg: MemlifeStore, home: Path) -> None:
    _merged_by_a_night(lg)
    lg.put(NS, "drink", {"content": NEW})
    new_id = next(i for i, (s, text) in _records(lg).items() if text == NEW)
    erase(lg.store, "u1", ids=[new_id], receipts=f"file://{home / 'receipts'}")
    after = _records(lg)
    assert NEW not in {text for _, text in after.values()}  # erased
    assert after.get("rep-1") == (Status.active, MERGED)  # the merge the user kept


def test_a_put_after_a_merge_reads_back_and_a_get_before_it_finds_nothing(
    lg: MemlifeStore,
) -> None:
    """Control: the view is as before (get None after the merge; the new value after a
    put; one item under the key in a search)."""
    _merged_by_a_night(lg)
    assert lg.get(NS, "drink") is None
    lg.put(NS, "drink", {"content": NEW})
    assert lg.get(NS, "drink").value == {"content": NEW}
    lg.put(NS, "drink", {"content": NEW + " Oat milk."})  # an update of the new value
    assert lg.get(NS, "drink").value == {"content": NEW + " Oat milk."}
    assert [i.key for i in lg.search(NS) if i.key == "drink"] == ["drink"]
    lg.delete(NS, "drink")
    assert lg.get(NS, "drink") is None


def test_a_put_over_a_deleted_item_still_takes_its_id(lg: MemlifeStore) -> None:
    """Control: a deleted (pending_delete) or plain item is written under its own id."""
    lg.put(NS, "k", {"content": TEA})
    lg.delete(NS, "k")
    lg.put(NS, "k", {"content": COFFEE})
    rec = lg.store.get(record_id("u1", PATH, "k"))
    assert (rec.status, rec.content) == (Status.active, COFFEE)


def test_a_newer_value_is_found_after_retention_deleted_the_older_ones(lg: MemlifeStore) -> None:
    """Nine nights each merged the key's value and the agent put it again; superseded
    retention then deleted the first eight. The ninth value is still the item (a scan that
    stopped at the gap of deleted values put a tenth beside it and read the ninth back)."""
    for night in range(9):
        lg.put(NS, "drink", {"content": f"Value {night}."})
        rid, _ = item_row(lg.store, "u1", PATH, "drink")
        lg.store.set_status([rid], Status.superseded, replaced_by=f"rep-{night}")
        lg.memory.long_term.invalidate()
    lg.put(NS, "drink", {"content": "Value 9."})
    gone = [record_id("u1", PATH, "drink", g) for g in range(9)]
    lg.store.delete_many(gone[:8])
    lg.memory.long_term.invalidate()
    assert lg.get(NS, "drink").value == {"content": "Value 9."}
    lg.put(NS, "drink", {"content": "Value 10."})  # an update of the live value, in place
    assert lg.get(NS, "drink").value == {"content": "Value 10."}
    live = [t for s, t in _records(lg).values() if s == Status.active]
    assert live == ["Value 10."]
