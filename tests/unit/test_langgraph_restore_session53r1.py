"""Audit 53r1: 53d's id slots after a quarantine restore brings an older value back beside
a newer one.

The gate quarantines an item's record (slot 0); the agent puts the key again, which writes
slot 1 (a quarantined row is history); an operator restores slot 0. Two active rows now
hold one key. ``get`` reads the newer (``item_row``: the latest created), but ``search``
listed the key twice, the older value included, and ``delete`` forgot only the newer: the
old value stayed active and was still served by ``search`` after the item was deleted.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("langgraph.store.base")

from memlife import Memory, Status  # noqa: E402
from memlife.integrations.langgraph import MemlifeStore, record_id  # noqa: E402
from memlife.quarantine import restore, snapshot  # noqa: E402

NS, PATH = ("users", "u1", "prefs"), "/users/u1/prefs"
OLD, NEW = "Drinks only green tea.", "Now drinks a flat white every morning."


@pytest.fixture(name="lg")
def _lg(home: Path) -> Iterator[MemlifeStore]:
    store = MemlifeStore(Memory(f"sqlite:///{home / 'memlife.db'}", ledger=home / "ledger"))
    yield store
    store.memory.close()


def _quarantined(lg: MemlifeStore, rid: str) -> None:
    """What a blocked gate does to a record: its snapshot kept, then quarantined."""
    snapshot(lg.store, [rid])
    lg.store.set_status([rid], Status.quarantined)
    lg.memory.long_term.invalidate()


def _restored_beside_a_newer_value(lg: MemlifeStore, home: Path) -> tuple[str, str]:
    lg.put(NS, "drink", {"content": OLD})
    old = record_id("u1", PATH, "drink")
    _quarantined(lg, old)
    lg.put(NS, "drink", {"content": NEW})  # slot 1: the quarantined row is history
    new = record_id("u1", PATH, "drink", 1)
    assert lg.store.get(new).content == NEW  # type: ignore[union-attr]
    out = restore(lg.store, [old], receipts=f"file://{home / 'receipts'}")
    assert out["counts"] == {"restored": 1}
    lg.memory.long_term.invalidate()
    return old, new


def test_search_lists_the_key_once_with_the_value_get_reads(lg: MemlifeStore, home: Path) -> None:
    _restored_beside_a_newer_value(lg, home)
    assert lg.get(NS, "drink").value == {"content": NEW}  # type: ignore[union-attr]
    assert [(i.key, i.value) for i in lg.search(NS)] == [("drink", {"content": NEW})]


def test_a_query_search_ranks_only_the_value_get_reads(lg: MemlifeStore, home: Path) -> None:
    _restored_beside_a_newer_value(lg, home)
    found = lg.search(NS, query="what does the user drink?")
    assert [(i.key, i.value) for i in found] == [("drink", {"content": NEW})]


def test_delete_takes_every_value_of_the_key(lg: MemlifeStore, home: Path) -> None:
    old, new = _restored_beside_a_newer_value(lg, home)
    lg.delete(NS, "drink")
    assert lg.get(NS, "drink") is None
    assert lg.search(NS) == []
    assert lg.search(NS, query="what does the user drink?") == []
    assert lg.list_namespaces() == []
    assert {lg.store.get(old).status, lg.store.get(new).status} == {  # type: ignore[union-attr]
        Status.pending_delete
    }


def test_a_restore_with_no_newer_value_is_the_item_again(lg: MemlifeStore, home: Path) -> None:
    """Control: the restored value is the item (get, search, query search) when no put
    came between; a delete then takes it."""
    lg.put(NS, "drink", {"content": OLD})
    old = record_id("u1", PATH, "drink")
    _quarantined(lg, old)
    assert lg.get(NS, "drink") is None and lg.search(NS) == []
    restore(lg.store, [old], receipts=f"file://{home / 'receipts'}")
    lg.memory.long_term.invalidate()
    assert lg.get(NS, "drink").value == {"content": OLD}  # type: ignore[union-attr]
    assert [(i.key, i.value) for i in lg.search(NS)] == [("drink", {"content": OLD})]
    assert [i.key for i in lg.search(NS, query="tea")] == ["drink"]
    assert lg.list_namespaces() == [NS]
    lg.delete(NS, "drink")
    assert lg.get(NS, "drink") is None and lg.search(NS) == []


def test_the_newer_value_is_updated_in_place_after_the_restore(
    lg: MemlifeStore, home: Path
) -> None:
    """Control: a put after the restore writes over the value get reads (slot 1)."""
    _, new = _restored_beside_a_newer_value(lg, home)
    lg.put(NS, "drink", {"content": NEW + " With oat milk."})
    assert lg.store.get(new).content == NEW + " With oat milk."  # type: ignore[union-attr]
    assert lg.get(NS, "drink").value == {"content": NEW + " With oat milk."}  # type: ignore[union-attr]
