"""Findings of an adversarial review of the online library, one test (or a few) each.

Races are forced deterministically: a SqliteStore subclass lets another connection (what
another process does) write at the exact point the finding names, then goes on as usual.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.store.base")

from anthropic.types import TextBlock, ToolUseBlock  # noqa: E402
from langgraph.store.base import InvalidNamespaceError  # noqa: E402

from memlife import Memory  # noqa: E402
from memlife.errors import InputError  # noqa: E402
from memlife.integrations.langgraph import MemlifeStore, record_id  # noqa: E402
from memlife.ledger import AccessLedger  # noqa: E402
from memlife.model import (  # noqa: E402
    MemoryRecord,
    RetentionClass,
    Status,
    content_sha256,
    utcnow,
)
from memlife.online.compaction import (  # noqa: E402
    EstimateTokenCounter,
    compact,
    render_transcript,
)
from memlife.online.memory import LongTermMemory  # noqa: E402
from memlife.stores.base import BatchResult  # noqa: E402
from memlife.stores.sqlite import SqliteStore  # noqa: E402

NS = "/users/u1/prefs"
LG_NS = ("users", "u1", "prefs")


class RacingStore(SqliteStore):
    """A store whose next write first runs ``other`` (another process's writer): after
    every read and check its caller made, right before the write itself."""

    other: Callable[[], None] | None = None

    def _race(self) -> None:
        fn, self.other = self.other, None
        if fn is not None:
            fn()

    def put_many(self, records: Sequence[MemoryRecord]) -> BatchResult:
        self._race()
        return super().put_many(records)

    def put_if_unchanged(self, record: MemoryRecord, expected_sha256: str | None) -> BatchResult:
        self._race()
        return super().put_if_unchanged(record, expected_sha256)

    def insert_new(self, records: Sequence[MemoryRecord], **kw: Any) -> BatchResult:
        self._race()
        return super().insert_new(records, **kw)

    def set_status_unless_held(self, ids: Sequence[str], status: Status, **kw: Any) -> BatchResult:
        self._race()
        return super().set_status_unless_held(ids, status, **kw)


class NoSignalStore(SqliteStore):
    """A store without the cheap change signal (as a remote store): shards refresh by age."""

    change_marker = None  # type: ignore[assignment]
    shard_fingerprint = None  # type: ignore[assignment]
    record_fingerprint = None  # type: ignore[assignment]


@pytest.fixture()
def db(tmp_path: Path) -> Path:
    return tmp_path / "m.db"


@pytest.fixture()
def memory(db: Path, tmp_path: Path) -> Iterator[Memory]:
    m = Memory(RacingStore(db), ledger=tmp_path / "ledger")
    yield m
    m.close()
    m.store.close()


def lg_put(store: SqliteStore, rid: str, content: str) -> None:
    """What the LangGraph adapter in another process does to an item: rewrite its text."""
    rec = store.get(rid)
    assert rec is not None
    prov = rec.provenance.model_copy(update={"content_sha256": content_sha256(content)})
    store.put_many([rec.model_copy(update={"content": content, "provenance": prov})])


# -- 1: a stale index must never call a fact a duplicate of a record saying otherwise ------


def test_fingerprint_moves_when_a_row_is_rewritten_to_the_same_length(db: Path) -> None:
    with SqliteStore(db) as store:
        MemlifeStore(Memory(store)).put(LG_NS, "pet", {"content": "Likes cats a lot."})
        rid = record_id("u1", NS, "pet")
        before = store.shard_fingerprint("u1", NS)
        assert store.record_fingerprint(rid) == before  # one row: its share is the whole
        lg_put(store, rid, "Likes dogs a lot.")  # same rowid, same length
        assert store.shard_fingerprint("u1", NS) != before


def test_remember_after_a_foreign_same_length_rewrite_stores_the_fact(
    memory: Memory, db: Path
) -> None:
    MemlifeStore(memory).put(LG_NS, "pet", {"content": "Likes cats a lot."})
    assert memory.recall("cats", actor="u1", namespace=NS)  # A's index is loaded
    with SqliteStore(db) as other:
        lg_put(other, record_id("u1", NS, "pet"), "Likes dogs a lot.")
    got = memory.remember("Likes cats a lot.", actor="u1", namespace=NS)
    assert got.created  # not a "duplicate" of the record that now says dogs
    texts = sorted(r.content for r in memory.store.page("u1", NS).records)
    assert texts == ["Likes cats a lot.", "Likes dogs a lot."]


def test_exact_duplicate_is_rechecked_against_the_record_as_stored(
    db: Path, tmp_path: Path
) -> None:
    # no change signal and a long refresh interval: the index stays stale on purpose
    with NoSignalStore(db) as store:
        mem = LongTermMemory(store, ledger=AccessLedger(tmp_path / "l"), refresh_seconds=1e9)
        first = mem.remember("u1", NS, None, "Likes cats a lot.")
        with SqliteStore(db) as other:
            lg_put(other, first.record_id, "Likes dogs a lot.")
        got = mem.remember("u1", NS, None, "Likes cats a lot.")
        assert got.created and got.record_id != first.record_id
        assert store.get(first.record_id).content == "Likes dogs a lot."  # not refreshed


# -- 2: the LangGraph actor mapping never guesses -----------------------------------------


def test_default_actor_mapping_refuses_a_namespace_it_cannot_read(memory: Memory) -> None:
    lg = MemlifeStore(memory)
    with pytest.raises(InvalidNamespaceError, match=r"\('memories', 'alice'\)"):
        lg.put(("memories", "alice"), "m1", {"content": "Lives in Paris."})
    assert list(memory.store.list_actors()) == []  # nothing stored under a guessed actor
    lg.put(("users", "u1", "facts"), "m1", {"content": "Lives in Paris."})  # unambiguous
    assert list(memory.store.list_actors()) == ["u1"]


def test_langmem_namespace_maps_each_user_to_their_own_actor(memory: Memory) -> None:
    from memlife.integrations.langgraph import actor_label

    lg = MemlifeStore(memory, actor_of=actor_label(1))
    lg.put(("memories", "alice"), "m1", {"content": "Lives in Paris."})
    lg.put(("memories", "bob"), "m1", {"content": "Works as a nurse."})
    assert sorted(memory.store.list_actors()) == ["alice", "bob"]
    assert [i.value for i in lg.search(("memories", "bob"))] == [{"content": "Works as a nurse."}]
    assert [h.content for h in memory.recall("job", actor="bob")] == ["Works as a nurse."]


# -- 3: a LangGraph put writes only over the row it read ----------------------------------


def test_lg_put_never_overwrites_a_hold_placed_after_its_read(
    memory: Memory, db: Path, tmp_path: Path
) -> None:
    from memlife.holds import place_hold

    lg = MemlifeStore(memory)
    lg.put(("users", "u1", "case"), "k", {"content": "Signed the contract on March 3."})
    rid = record_id("u1", "/users/u1/case", "k")

    def hold() -> None:
        with SqliteStore(db) as other:
            place_hold(other, ids=[rid], receipts=f"file://{tmp_path / 'receipts'}")

    assert isinstance(memory.store, RacingStore)
    memory.store.other = hold
    with pytest.raises(PermissionError, match="held"):
        lg.put(("users", "u1", "case"), "k", {"content": "Never signed any contract."})
    rec = memory.store.get(rid)
    assert rec.retention_class is RetentionClass.legal_hold
    assert rec.content == "Signed the contract on March 3."


def test_forget_and_lg_delete_never_touch_a_hold_placed_after_their_read(
    memory: Memory, db: Path, tmp_path: Path
) -> None:
    """The hold is checked again inside the status write's transaction (invariant 1): a
    `memlife hold place` between forget's read and its write wins; nothing is hidden."""
    from memlife.holds import place_hold

    lg = MemlifeStore(memory)
    for key in ("nda", "lease"):
        lg.put(("users", "u1", "case"), key, {"content": f"Signed the {key} on March 3."})
    ids = [record_id("u1", "/users/u1/case", k) for k in ("nda", "lease")]

    def hold(rid: str) -> Callable[[], None]:
        def place() -> None:
            with SqliteStore(db) as other:
                place_hold(other, ids=[rid], receipts=f"file://{tmp_path / 'receipts'}")

        return place

    assert isinstance(memory.store, RacingStore)
    memory.store.other = hold(ids[0])
    assert memory.forget(ids[0], actor="u1") == []
    memory.store.other = hold(ids[1])
    with pytest.raises(PermissionError, match="held"):
        lg.delete(("users", "u1", "case"), "lease")
    for rid in ids:
        rec = memory.store.get(rid)
        assert rec is not None and rec.status is Status.active
        assert rec.retention_class is RetentionClass.legal_hold
    assert len(memory.recall("Signed the nda", actor="u1", k=5)) >= 1


def test_the_online_api_never_reactivates_a_held_superseded_record(memory: Memory) -> None:
    """set_status(held, active) dropped its replacement with no receipt (invariant 1)."""
    from memlife.model import MemoryType, Provenance, utcnow

    def r(rid: str, content: str, **kw: Any) -> MemoryRecord:
        return MemoryRecord(id=rid, actor_id="u1", namespace=NS, memory_type=MemoryType.semantic,
                            content=content, subject="home", created_at=utcnow(), **kw)  # fmt: skip

    memory.store.put_many([
        r("s", "Lives in Berlin.", status=Status.superseded,
          retention_class=RetentionClass.legal_hold, provenance=Provenance(replaced_by="r")),
        r("r", "Lives in Munich.", provenance=Provenance(supersedes=["s"])),
    ])  # fmt: skip
    assert memory.long_term.set_status(["s"], Status.active) == []
    s = memory.store.get("s")
    assert s.status is Status.superseded and s.provenance.replaced_by == "r"


def test_lg_put_never_brings_back_content_erased_after_its_checks(
    memory: Memory, db: Path, tmp_path: Path
) -> None:
    from memlife.erase import erase

    lg = MemlifeStore(memory)
    text = "Diagnosed with condition X in 2024."
    lg.put(("users", "u1", "health"), "dx", {"content": text})
    rid = record_id("u1", "/users/u1/health", "dx")

    def erasure() -> None:
        with SqliteStore(db) as other:
            erase(other, "u1", ids=[rid], receipts=f"file://{tmp_path / 'receipts'}")

    assert isinstance(memory.store, RacingStore)
    memory.store.other = erasure
    with pytest.raises(PermissionError, match="ERASED_CONTENT"):
        lg.put(("users", "u1", "health"), "dx", {"content": text})
    assert memory.store.get(rid) is None
    assert memory.recall("condition X diagnosis", actor="u1") == []


def test_put_if_unchanged_refuses_a_row_changed_since_the_read(db: Path) -> None:
    with SqliteStore(db) as store:
        MemlifeStore(Memory(store)).put(LG_NS, "pet", {"content": "Likes cats a lot."})
        rec = store.get(record_id("u1", NS, "pet"))
        lg_put(store, rec.id, "Likes dogs a lot.")
        new = rec.model_copy(update={"content": "Likes birds."})
        assert [f.code for f in store.put_if_unchanged(new, rec.sha256).failed] == ["CHANGED"]
        assert [f.code for f in store.put_if_unchanged(new, None).failed] == ["CHANGED"]
        assert store.get(rec.id).content == "Likes dogs a lot."


# -- 4: two processes remembering one fact at once store it once ---------------------------


def test_concurrent_remember_of_one_fact_stores_it_once(db: Path, tmp_path: Path) -> None:
    fact = "Has a meeting with the dentist on Friday."
    with SqliteStore(db) as sa, RacingStore(db) as sb:
        a = LongTermMemory(sa, ledger=AccessLedger(tmp_path / "la"))
        b = LongTermMemory(sb, ledger=AccessLedger(tmp_path / "lb"))
        b.recall("u1", "warm up", namespace=NS)  # B's index is loaded (empty)
        first: list[str] = []
        # A stores the fact after B's index looked and before B's insert
        sb.other = lambda: first.append(a.remember("u1", NS, None, fact).record_id)
        got = b.remember("u1", NS, None, fact)
        assert not got.created and got.record_id == first[0]
        assert [r.content for r in sa.page("u1", NS, statuses=[Status.active]).records] == [fact]
        assert sa.get(first[0]).access_count == 1  # B's remember refreshed A's record


def test_import_path_keeps_its_semantics(db: Path) -> None:
    from memlife.model import MemoryType

    with SqliteStore(db) as store:
        recs = [
            MemoryRecord(id=f"m-{i}", actor_id="u1", namespace=NS, content="Same text.",
                         memory_type=MemoryType.semantic, created_at=utcnow())
            for i in range(2)
        ]  # fmt: skip
        assert store.insert_new(recs).succeeded == ["m-0", "m-1"]  # no uniqueness asked


# -- 5: Memory uses the store's ledger backend ---------------------------------------------


def test_memory_writes_accesses_to_the_remote_ledger_with_remote_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import memlife.state as state_mod
    from memlife.state.ledger import S3AccessLedger
    from tests.fakes.agentcore import AgentCoreHarness
    from tests.support.aws_state import provision, state_url

    harness = AgentCoreHarness()
    try:
        store = harness.store()
        surl = state_url("adversarial-ledger")
        provision(surl)
        monkeypatch.setattr(state_mod, "_open", {})
        monkeypatch.setenv("MEMLIFE_STATE", surl)
        memory = Memory(store)
        assert isinstance(memory.long_term.ledger, S3AccessLedger)  # where the nightly reads
    finally:
        harness.close()


# -- 6: a LangGraph search logs only what it returns ---------------------------------------


def test_lg_search_logs_only_the_items_returned(memory: Memory, tmp_path: Path) -> None:
    lg = MemlifeStore(memory)
    for ns in (("users", "u1", "a"), ("users", "u1", "b")):
        for i in range(6):
            value = {"text": f"note number {i} about cooking", "tag": "x" if i == 3 else "y"}
            lg.put(ns, f"k{i}", value)
    got = lg.search(("users", "u1"), query="cooking", filter={"tag": "x"}, limit=1)
    paged = lg.search(("users", "u1", "a"), query="cooking", limit=2, offset=3)
    memory.long_term.ledger.flush()
    table = AccessLedger(tmp_path / "ledger").read()
    logged = sorted(table.column("record_id").to_pylist())
    returned = [(i.namespace, i.key) for i in [*got, *paged]]
    assert len(got) == 1 and len(paged) == 2
    assert logged == sorted(record_id("u1", "/" + "/".join(n), k) for n, k in returned)
    assert sorted(table.column("rank").to_pylist()) == [1, 4, 5]  # positions in the ranking


# -- 7: an expired record is served by no read ---------------------------------------------


def test_expired_records_are_not_served_by_get_or_listing(memory: Memory) -> None:
    rid = memory.remember(
        "Visited the Louvre with Anna.", actor="u1", namespace="/users/u1/trips",
        memory_type="episodic", at=utcnow() - timedelta(days=400),
    ).id  # fmt: skip
    lg = MemlifeStore(memory)
    assert memory.recall("Louvre", actor="u1") == []
    assert memory.get(rid, actor="u1") is None
    assert lg.get(("users", "u1", "trips"), rid) is None
    assert lg.search(("users", "u1")) == []
    assert memory.forget(rid, actor="u1") == [rid]  # the user's forget still applies


# -- 8: the access ledger does not sit on its rows -----------------------------------------


def test_ledger_flushes_buffered_rows_by_age(tmp_path: Path) -> None:
    ledger = AccessLedger(tmp_path / "l", flush_seconds=0.2)
    ledger.append("u1", NS, "m-1")
    deadline = time.monotonic() + 10
    while not ledger.files() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ledger.files() and ledger.pending == 0


def test_ledger_flushes_at_interpreter_exit(tmp_path: Path) -> None:
    code = (
        "from memlife.ledger import AccessLedger\n"
        f"led = AccessLedger({str(tmp_path / 'l')!r})\n"
        "led.append('u1', '/n', 'm-1')\n"
    )  # never flushed, never closed: the process just ends
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    assert AccessLedger(tmp_path / "l").access_stats().keys() == {"m-1"}


# -- 9: the LangGraph put has remember's content bound -------------------------------------


def test_lg_put_refuses_content_over_the_policy_bound(memory: Memory) -> None:
    limit = memory.long_term.content_max_bytes
    with pytest.raises(InputError, match=r"'big'.*over the limit"):
        MemlifeStore(memory).put(LG_NS, "big", {"content": "a" * (limit + 1)})
    assert memory.store.get(record_id("u1", NS, "big")) is None


# -- 10: compaction reads SDK blocks, media and server tool blocks -------------------------


def test_sdk_block_objects_are_counted() -> None:
    big = "x" * 40_000
    hist: list[Any] = [
        {"role": "user", "content": "write"},
        {"role": "assistant", "content": [TextBlock(type="text", text=big)]},
        {"role": "user", "content": "more"},
        {"role": "assistant", "content": [ToolUseBlock(type="tool_use", id="t1", name="n", input={})]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
    ]  # fmt: skip
    assert EstimateTokenCounter().count(hist) >= 10_000

    class Short:
        def summarize(self, messages: Sequence[Any]) -> str:
            return "wrote a lot"

    r = compact(hist, budget_tokens=1_000, keep_last_turns=1, summarizer=Short())
    assert r.compacted and not r.over_budget


def test_an_unreadable_block_is_refused_before_counting() -> None:
    hist = [{"role": "user", "content": [object()]}]
    with pytest.raises(InputError, match="message 0: block 0"):
        EstimateTokenCounter().count(hist)
    with pytest.raises(InputError, match="message 0: block 0"):
        compact(hist, budget_tokens=1)


def test_media_in_tool_results_are_placeholders_and_server_tools_rendered() -> None:
    data = "QUJD" * 50_000  # 200 kB of base64
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
    hist = [
        {"role": "user", "content": "Check the login page."},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "shot", "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [image]}]},
        {"role": "assistant", "content": [
            {"type": "server_tool_use", "id": "s1", "name": "web_search", "input": {"query": "acme"}},
            {"type": "web_search_tool_result", "tool_use_id": "s1", "content": [
                {"type": "web_search_result", "url": "https://status.acme.example",
                 "title": "Acme Status", "encrypted_content": "SECRETBLOB"}]},
        ]},
    ]  # fmt: skip
    counted = EstimateTokenCounter().count(hist[2:3])
    assert 1_000 < counted < 2_000  # an image's cost, not its base64 length (~50k)
    text = render_transcript(hist)
    assert data[:40] not in text and "[image]" in text
    assert "web_search" in text and "Acme Status" in text and "https://status.acme.example" in text
    assert "SECRETBLOB" not in text and "omitted" not in text


# -- 11: a LangGraph put on a memlife-native record's key replaces it ----------------------


def test_lg_put_on_a_native_records_key_replaces_it(memory: Memory) -> None:
    rid = memory.remember("Lives in Paris.", actor="u1", namespace="/users/u1/facts").id
    lg = MemlifeStore(memory)
    ns = ("users", "u1", "facts")
    lg.put(ns, rid, {"content": "Lives in Berlin."})
    assert lg.get(ns, rid).value == {"content": "Lives in Berlin."}
    assert [(i.key, i.value) for i in lg.search(ns)] == [(rid, {"content": "Lives in Berlin."})]


def test_restating_a_fact_whose_record_expired_stores_it_anew(tmp_path: Path) -> None:
    """Review of this session's fixes: an expired record is never served (recall, get), yet
    restating its fact "refreshed" it (created=False): the record stayed expired, the
    nightly run deleted it, and the fact was lost. The expired record counts as absent."""
    from datetime import UTC, datetime

    m = Memory(f"sqlite:///{tmp_path}/m.db", ledger=str(tmp_path / "ledger"))
    try:
        fact = "Went to the dentist on the corner street."
        old = m.remember(fact, actor="u-1", memory_type="episodic",
                         at=datetime.now(UTC) - timedelta(days=400))  # fmt: skip
        again = m.remember(fact, actor="u-1", memory_type="episodic")
        assert again.created and again.id != old.id
        assert m.get(again.id, actor="u-1") is not None
        assert [h.id for h in m.recall("dentist", actor="u-1", threshold=0.1)] == [again.id]
    finally:
        m.close()
