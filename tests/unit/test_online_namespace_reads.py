"""Reads of an old store, and record ids no record can have (the online library's door).

1. A namespace without its leading '/'. New records need it (``remember``, import), but a
   store written before the rule keeps records in ``notes``: recall over all namespaces
   finds them, so a read filtered by namespace must reach them too. The rule
   (``memlife.online.inputs.namespace_filter_arg``): a read's namespace is one a new
   record can have, or one of the actor's namespaces spelled exactly as stored. ``/notes``
   is another namespace than ``notes`` (exact, as every namespace key is); an unrooted
   namespace the actor does not have is refused, naming the argument. The LangGraph
   adapter shows ``notes`` as ``("notes",)`` in search and namespace listing; get of that
   namespace finds the item too.
2. A record id longer than the record's bound (256 characters) or not text: refused by
   every entry point (``Memory.get``/``forget``, ``LongTermMemory.set_status``/``forget``,
   ``AsyncMemory.get``) before the store is asked, naming the argument, never quoting it.

Each test failed on the code before (recall refused ``notes``; a 10 MB id was looked up).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memlife import AsyncMemory, Memory
from memlife.cli import app
from memlife.errors import BAD_INPUT, InputError
from memlife.ledger import AccessLedger
from memlife.model import MemoryRecord, MemoryType, Status, utcnow
from memlife.online.memory import LongTermMemory
from memlife.stores.sqlite import SqliteStore

OLD = "notes"  # as an older version stored it: no leading '/'
NS = "/users/u1/facts"
TEA = "Drinks only green tea, never coffee."
DOG = "Has a dog named Rex."
TEN_MB = 10 * 1024 * 1024
ID_MAX = 256  # MemoryRecord.id's bound, written out: the test states the rule


def old_record(rid: str = "old-1", actor: str = "u1", content: str = TEA) -> MemoryRecord:
    return MemoryRecord(
        id=rid,
        actor_id=actor,
        namespace=OLD,
        memory_type=MemoryType.semantic,
        content=content,
        created_at=utcnow() - timedelta(days=3),
        owner=actor,
    )


@pytest.fixture()
def db(home: Path) -> Path:
    """An old store: one record in ``notes`` written through the store API (the store never
    checked namespaces; import and remember did, before the leading '/' was required), and
    one written since, in a rooted namespace."""
    home.mkdir(parents=True, exist_ok=True)
    path = home / "memlife.db"  # the home fixture's MEMLIFE_STORE
    store = SqliteStore(path)
    store.put_many([old_record()])
    with LongTermMemory(store, ledger=AccessLedger(home / "ledger")) as mem:
        mem.remember("u1", NS, None, DOG)
    store.close()
    return path


@pytest.fixture()
def store(db: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(db)
    yield s
    s.close()


@pytest.fixture()
def mem(store: SqliteStore, home: Path) -> Iterator[LongTermMemory]:
    m = LongTermMemory(store, ledger=AccessLedger(home / "ledger"))
    yield m
    m.close()


def refused(call: Callable[[], object], argument: str) -> str:
    """``call()`` raises an InputError starting with ``argument`` and quoting nothing long."""
    with pytest.raises(InputError) as info:
        call()
    message = str(info.value)
    assert message.startswith(f"{argument} "), message[:300]
    assert len(message) < 300, f"the refusal quotes the argument back: {len(message)} chars"
    return message


# -- 1. a namespace stored without its leading '/' -----------------------------------------
def test_recall_reaches_a_namespace_stored_without_its_slash(mem: LongTermMemory) -> None:
    everywhere = {h.record.id: h.record.namespace for h in mem.recall("u1", "green tea", k=5)}
    assert everywhere.get("old-1") == OLD  # recall over all namespaces always found it
    hits = mem.recall("u1", "green tea", namespace=OLD)
    assert [(h.record.id, h.record.namespace) for h in hits] == [("old-1", OLD)]
    # exact, as every namespace key: '/notes' is another (empty) namespace
    assert mem.recall("u1", "green tea", namespace="/" + OLD) == []
    assert [h.record.content for h in mem.recall("u1", "dog", namespace=NS)] == [DOG]


def test_an_unrooted_namespace_the_actor_does_not_have_is_still_refused(
    store: SqliteStore, mem: LongTermMemory
) -> None:
    """Refused as before, naming the argument, and saying what would be taken: another
    actor's stored namespace is not this actor's, a typo is not the stored one."""
    for actor, namespace in (("u1", "users/u1/facts"), ("u1", "note"), ("u2", OLD)):
        message = refused(
            lambda a=actor, n=namespace: mem.recall(a, "tea", namespace=n), "namespace"
        )
        assert repr(namespace) in message and "must start with '/'" in message
        assert "stored without it" in message, message
    # what no record can have at all is refused, unrooted or not
    for bad in ("a/../b", "/a//b", "notes/", " "):
        refused(lambda n=bad: mem.recall("u1", "tea", namespace=n), "namespace")
    refused(lambda: mem.recall("u1", "tea", namespace="n" * TEN_MB), "namespace")
    # writes stay strict: remember into the old namespace is refused
    refused(lambda: mem.remember("u1", OLD, None, "Likes rain."), "namespace")


def test_the_public_api_reaches_it_too(store: SqliteStore, home: Path) -> None:
    with Memory(store, ledger=home / "ledger-api") as memory:
        got = memory.recall("green tea", actor="u1", namespace=OLD)
        assert [(r.id, r.namespace) for r in got] == [("old-1", OLD)]
        refused(lambda: memory.recall("tea", actor="u1", namespace="users/u9"), "namespace")

    async def main() -> list[str]:
        async with AsyncMemory(store, ledger=home / "ledger-async") as memory:
            return [r.id for r in await memory.recall("green tea", actor="u1", namespace=OLD)]

    assert asyncio.run(main()) == ["old-1"]


def test_the_cli_reaches_it_and_refuses_an_unknown_unrooted_one(db: Path) -> None:
    runner = CliRunner()
    ok = runner.invoke(app, ["recall", "green tea", "--actor", "u1", "--namespace", OLD, "--json"])
    assert ok.exit_code == 0, ok.output
    assert [(r["id"], r["namespace"]) for r in json.loads(ok.stdout)] == [("old-1", OLD)]
    bad = runner.invoke(app, ["recall", "tea", "--actor", "u1", "--namespace", "users/u1/facts"])
    assert bad.exit_code == BAD_INPUT, bad.output
    assert "namespace 'users/u1/facts' must start with '/'" in " ".join(bad.output.split())


def test_the_langgraph_store_searches_and_gets_it(store: SqliteStore, home: Path) -> None:
    pytest.importorskip("langgraph.store.base")
    from memlife.integrations.langgraph import MemlifeStore

    with Memory(store, ledger=home / "ledger-lg") as memory:
        lg = MemlifeStore(memory, actor_of=lambda ns: "u1")
        assert ("notes",) in lg.list_namespaces()
        for prefix in ((OLD,), ()):  # a search over everything asked recall for 'notes'
            found = lg.search(prefix, query="green tea", limit=5)
            assert [(i.namespace, i.key) for i in found if i.key == "old-1"] == [((OLD,), "old-1")]
        item = lg.get((OLD,), "old-1")  # what search showed, get finds
        assert item is not None and item.value == {"content": TEA}
        assert lg.get(("other",), "old-1") is None  # the namespace still has to match


# -- 2. record ids no record can have --------------------------------------------------------
ENTRIES = {  # entry point: (call with an id, the argument named in the refusal)
    "Memory.get": (lambda m, rid: m.get(rid, actor="u1"), "record_id"),
    "AsyncMemory.get": (lambda m, rid: _async_get(m, rid), "record_id"),
    "Memory.forget": (lambda m, rid: m.forget(rid, actor="u1"), "ids"),
    "Memory.forget list": (lambda m, rid: m.forget(["old-1", rid], actor="u1"), "ids"),
    "LongTermMemory.forget": (lambda m, rid: m.long_term.forget([rid, "old-1"]), "record_ids"),
    "LongTermMemory.set_status": (
        lambda m, rid: m.long_term.set_status(rid, Status.quarantined),
        "record_ids",
    ),
}


def _async_get(memory: Memory, rid: Any) -> object:
    async def main() -> object:
        async with AsyncMemory(memory.store, ledger=memory.long_term.ledger) as amem:
            return await amem.get(rid, actor="u1")

    return asyncio.run(main())


@pytest.mark.parametrize("entry", list(ENTRIES))
def test_an_id_no_record_can_have_is_refused_before_the_store_is_asked(
    store: SqliteStore, home: Path, monkeypatch: pytest.MonkeyPatch, entry: str
) -> None:
    call, argument = ENTRIES[entry]
    asked: list[str] = []
    for name in ("get", "get_many", "set_status", "set_status_unless_held", "put_many"):
        real = getattr(store, name)

        def spy(*args: Any, _real: Any = real, _name: str = name, **kw: Any) -> Any:
            asked.append(_name)
            return _real(*args, **kw)

        monkeypatch.setattr(store, name, spy)
    before = sorted(r.model_dump_json() for r in store.iter_all())
    with Memory(store, ledger=home / "ledger-ids") as memory:
        for rid in ("i" * TEN_MB, "i" * (ID_MAX + 1)):
            message = refused(lambda r=rid: call(memory, r), argument)
            assert f"{len(rid)} characters, over the limit of {ID_MAX}" in message
        for rid in (12345, b"old-1", None):
            refused(lambda r=rid: call(memory, r), argument)
        assert asked == [], f"the store was asked: {asked}"
        # nothing changed: not even old-1, asked for beside the bad id (one refuses the call)
        assert sorted(r.model_dump_json() for r in store.iter_all()) == before
        # at the bound: an id a record can have is looked up
        call(memory, "i" * ID_MAX)
        assert asked != []
