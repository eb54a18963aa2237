"""The public library API: `from memlife import Memory` (sync and async), light import."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

import memlife
from memlife import AsyncMemory, Memory, MemoryRecord, Recollection, Remembered, Status
from memlife.ledger import AccessLedger
from memlife.model import RetentionClass
from memlife.stores.sqlite import SqliteStore

TEA = "I only drink green tea, never coffee."


@pytest.fixture(name="memory")
def _memory(tmp_path: Path) -> Memory:
    with Memory(f"sqlite:///{tmp_path / 'm.db'}", ledger=tmp_path / "ledger") as m:
        yield m


def test_remember_recall_with_keywords(memory: Memory, tmp_path: Path) -> None:
    saved = memory.remember(TEA, actor="u1", subject="beverage")
    assert isinstance(saved, Remembered) and saved.created
    memory.remember("My dog is called Rex.", actor="u1", namespace="/users/u1/pets")
    memory.remember("I drink coffee every morning.", actor="u2")
    hits = memory.recall("What do I usually drink?", actor="u1", k=3)
    assert hits and isinstance(hits[0], Recollection)
    assert hits[0].id == saved.id and hits[0].content == TEA and hits[0].rank == 1
    assert hits[0].namespace == "/users/u1/facts" and hits[0].subject == "beverage"
    assert all(h.record.actor_id == "u1" for h in hits)  # never another actor's memory
    memory.close()
    assert saved.id in AccessLedger(tmp_path / "ledger").access_stats(actor_id="u1")


def test_duplicate_refreshes(memory: Memory) -> None:
    a = memory.remember(TEA, actor="u1")
    b = memory.remember(TEA, actor="u1")
    assert a.created and not b.created and b.id == a.id and b.similarity == 1.0


def test_positional_arguments_refused(memory: Memory) -> None:
    with pytest.raises(TypeError):
        memory.remember(TEA, "u1")  # type: ignore[misc]
    with pytest.raises(TypeError):
        memory.recall("tea", "u1")  # type: ignore[misc]


def test_bad_input_is_a_value_error(memory: Memory) -> None:
    with pytest.raises(ValueError):
        memory.remember("   ", actor="u1")
    with pytest.raises(ValueError):
        memory.remember(TEA, actor="")
    with pytest.raises(ValueError):
        memory.remember(TEA, actor="u1", source="rumour")


def test_forget_only_touches_the_actors_own(memory: Memory) -> None:
    mine = memory.remember(TEA, actor="u1").id
    theirs = memory.remember("I drink coffee every morning.", actor="u2").id
    assert memory.forget([theirs, "m-missing"], actor="u1") == []
    assert memory.get(theirs, actor="u2") is not None
    assert memory.forget(mine, actor="u1") == [mine]
    assert memory.get(mine, actor="u1") is None  # no longer active
    assert memory.store.get(mine).status is Status.pending_delete  # the nightly run deletes it
    assert all(h.id != mine for h in memory.recall("green tea", actor="u1", threshold=-1.0))


def test_forget_leaves_a_held_record_alone(memory: Memory) -> None:
    """Invariant 1 from the library: forget would have hidden a legal_hold record with no
    receipt (pending_delete is invisible to recall)."""
    held = memory.remember(TEA, actor="u1").id
    free = memory.remember("I drink coffee every morning.", actor="u1").id
    rec = memory.store.get(held)
    memory.store.put_many([rec.model_copy(update={"retention_class": RetentionClass.legal_hold})])
    assert memory.forget([held, free], actor="u1") == [free]
    assert memory.store.get(held).status is Status.active
    assert any(h.id == held for h in memory.recall("green tea", actor="u1", threshold=-1.0))


def test_passed_store_is_not_closed(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "s.db")
    with Memory(store, ledger=tmp_path / "ledger") as m:
        m.remember(TEA, actor="u1")
    assert store.count() == 1  # still open: the caller owns it
    store.close()


def test_compact_is_reachable(memory: Memory) -> None:
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    res = memlife.compact(msgs, budget_tokens=10_000)
    assert not res.compacted and res.reason == "under_budget"
    assert Memory.compact(msgs, budget_tokens=10_000).reason == "under_budget"


def test_async_variant(tmp_path: Path) -> None:
    async def scenario() -> tuple[list[Recollection], MemoryRecord | None, list[str]]:
        async with AsyncMemory(f"sqlite:///{tmp_path / 'a.db'}", ledger=tmp_path / "l") as m:
            saved, other = await asyncio.gather(
                m.remember(TEA, actor="u1"), m.remember("Rex is my dog.", actor="u1")
            )
            hits = await m.recall("what do I drink", actor="u1", k=1)
            rec = await m.get(saved.id, actor="u1")
            gone = await m.forget(other.id, actor="u1")
            return hits, rec, gone

    hits, rec, gone = asyncio.run(scenario())
    assert hits[0].content == TEA and rec is not None and rec.content == TEA and len(gone) == 1


def test_public_surface() -> None:
    for name in memlife.__all__:
        assert getattr(memlife, name) is not None, name
    assert (Path(memlife.__file__).parent / "py.typed").exists()


def test_import_is_light() -> None:
    code = (
        "import sys, memlife; heavy = [m for m in ('numpy', 'pydantic', 'prefect', 'pyarrow',"
        " 'onnxruntime', 'typer') if m in sys.modules]; print(','.join(heavy))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_all_matches_the_lazy_table() -> None:
    assert set(memlife.__all__) == set(memlife._EXPORTS) | {"__version__"}
