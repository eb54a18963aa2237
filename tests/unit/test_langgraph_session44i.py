"""Audit 44i (session 44): what an erased LangGraph JSON item's tombstones refuse later (tombstones._carried_texts).

Since session 44 an erasure tombstones each free-text string (two words or more) a JSON
item carries, and a put checks every string it carries against the tombstones.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("langgraph.store.base")

from memlife import Memory  # noqa: E402
from memlife.integrations.langgraph import MemlifeStore, record_id  # noqa: E402
from tests.support.cli import invoke

NS = ("users", "u1", "todos")
PATH = "/users/u1/todos"


def test_erasing_one_todo_does_not_refuse_every_later_todo_in_the_same_state(home: Path) -> None:
    """The agent keeps to-dos as JSON items with a status field; the user has one to-do
    erased (``memlife erase --id``). A later, unrelated to-do in the same state ("in
    progress") shares no text of the erased one but a field value every to-do has: it
    must be stored, not refused as erased content."""
    db = home / "memlife.db"
    with Memory(f"sqlite:///{db}", ledger=home / "ledger") as m:
        MemlifeStore(m).put(NS, "t1", {"task": "Book an HIV test at the clinic",
                                       "status": "in progress"})  # fmt: skip
    code, out, err = invoke("erase", "--actor", "u1", "--id", record_id("u1", PATH, "t1"), "-y")
    assert code == 0, out + err
    with Memory(f"sqlite:///{db}", ledger=home / "ledger") as m:
        lg = MemlifeStore(m)
        with pytest.raises(PermissionError, match="ERASED_CONTENT"):  # the erased text: refused
            lg.put(NS, "t2", {"content": "Book an HIV test at the clinic"})
        lg.put(NS, "t3", {"task": "Buy milk", "status": "in progress"})
        item = lg.get(NS, "t3")
        assert item is not None and item.value["status"] == "in progress"
