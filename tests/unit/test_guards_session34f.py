"""Guards a mutation audit found unattacked (session 34, round f: the model client's error
mapping and outage streak, online remember's duplicate refresh and recall's access log, the
online inputs): each test holds one guarantee that a named guard in memlife/ alone keeps,
and fails when that guard is removed or loosened. Real components: the anthropic SDK against
the local Messages-API server, the SQLite store, the MiniLM embedder."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from memlife import fanout
from memlife.consolidate import ConsolidationError
from memlife.consolidate.answers import answer_book
from memlife.consolidate.anthropic import OUTAGE_CALLS, AnthropicConsolidator
from memlife.consolidate.prompts import TOOL_NAME
from memlife.embed import MiniLMEmbedder, default_embedder
from memlife.embed_cache import EmbeddingCache
from memlife.errors import InputError
from memlife.ledger import AccessLedger
from memlife.model import Status
from memlife.online.memory import LongTermMemory
from memlife.pipeline import RunConfig, run_local, start_run
from memlife.stores.sqlite import Refresh, SqliteStore
from tests.fakes.messages_api import error_reply, tool_use_reply
from tests.support.gate import NOW
from tests.support.gate import rec as gate_rec
from tests.unit.test_consolidation_adversarial import COFFEE, PAIR, _make
from tests.unit.test_model_deadline import _drip, _Quiet, _serve
from tests.unit.test_throttling import throttle_reads

NS = "/users/u1/facts"
ANSWER = {"summary": COFFEE, "claims": [COFFEE], "confidence": 0.9, "source_ids": ["b-1", "b-2"]}


@pytest.fixture(scope="module")
def emb() -> MiniLMEmbedder:
    return default_embedder()


def refused(server: Any, emb: MiniLMEmbedder, **kw: Any) -> ConsolidationError:
    before = [r.model_dump() for r in PAIR.records]
    with pytest.raises(ConsolidationError) as info:
        _make(server, emb, **kw).consolidate(PAIR)
    assert [r.model_dump() for r in PAIR.records] == before  # originals intact
    return info.value


# -- 1. anthropic.py _RETRYABLE_STATUS: a 408 is the service's, retried, nobody blamed ---------
def test_a_request_timeout_status_is_retryable(messages_server, emb) -> None:
    """A 408 (the server timed the request out) is MODEL_UNAVAILABLE and retryable, not a
    MODEL_REJECTED that sends the group to review for good."""
    messages_server.enqueue(error_reply(408, "timeout_error", "Request timed out"))
    err = refused(messages_server, emb)
    assert err.code == "MODEL_UNAVAILABLE" and err.retryable


# -- 3. anthropic.py _parse: never two calls of the consolidation tool ------------------------
def test_two_calls_of_the_consolidation_tool_are_no_answer(messages_server, emb) -> None:
    """Two calls of the tool (which one to take?) is SCHEMA_INVALID: no result."""
    messages_server.enqueue(tool_use_reply(TOOL_NAME, ANSWER, more=[(TOOL_NAME, ANSWER)]))
    err = refused(messages_server, emb)
    assert err.code == "SCHEMA_INVALID" and not err.retryable


# -- 4. anthropic.py _call: a timeout counts toward the outage streak --------------------------
def test_timeouts_in_a_row_stop_the_run_sending(messages_server, emb) -> None:
    """A hanging endpoint stops costing each group its timeout after OUTAGE_CALLS groups."""
    ok = tool_use_reply(TOOL_NAME, ANSWER)
    messages_server.set_handler(lambda body: ok.delayed(1.0))
    c = _make(messages_server, emb, timeout=0.2)
    for _ in range(OUTAGE_CALLS + 3):
        with pytest.raises(ConsolidationError) as info:
            c.consolidate(PAIR)
        assert info.value.code == "MODEL_UNAVAILABLE" and info.value.retryable
    assert len(messages_server.message_requests) == OUTAGE_CALLS


# -- 5. sqlite.py _REFRESH: a duplicate's refresh never lowers or relabels what is stored -----
def test_a_restatement_refreshes_without_lowering_confidence_or_relabelling(
    tmp_path: Path, emb: MiniLMEmbedder
) -> None:
    """An exact duplicate said with less confidence and another subject refreshes the
    record (one copy, access counted) but keeps its higher confidence and its subject."""
    store = SqliteStore(tmp_path / "memlife.db")
    mem = LongTermMemory(store, embedder=emb, ledger=AccessLedger(tmp_path / "ledger"))
    try:
        first = mem.remember("u1", NS, "pets", "Has a dog named Rex.", confidence=0.9)
        again = mem.remember("u1", NS, "animals", "has a dog named Rex", confidence=0.4)
        assert again.created is False and again.record_id == first.record_id
        assert [r.id for r in store.iter_all()] == [first.record_id]
        rec = store.get(first.record_id)
        assert rec is not None and rec.access_count == 1
        assert (rec.confidence, rec.subject) == (0.9, "pets")
    finally:
        mem.close()
        store.close()


# -- 6. throttling.py failed_outcome: every shard of a failed batch is named -------------------
def test_a_batch_throttled_for_good_names_every_one_of_its_shards(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two shards in one batch, the batch throttled for good: both shards are failed-shard
    entries (none silently vanishes from the run's counts), each tenant named on its own."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("MEMLIFE_RETRY_BACKOFF_SECONDS", "0")
    home.mkdir()
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([gate_rec("a-1", "facts", "Likes tea."),
                        gate_rec("b-1", "facts", "Likes jazz.", actor="u-2")])  # fmt: skip
    throttle_reads(monkeypatch, "u-1", -1)
    summary = run_local(RunConfig(now=NOW, workers=1, shards_per_batch=2))
    named = sorted(f["shard"] for f in summary.failed_shards)
    assert len(named) == 2 and "u-1" in named[0] and "u-2" in named[1]
    assert {f["code"] for f in summary.failed_shards} == {"THROTTLED"} and summary.records == 0


# -- 7. anthropic.py _consolidate: a kept answer that keeps the group apart is kept ------------
def test_a_kept_answer_that_keeps_the_group_apart_is_not_asked_again(
    home: Path, messages_server, emb: MiniLMEmbedder
) -> None:
    """The dry run's "complement" answer (KEEP_APART) serves the apply run, and its reruns,
    without a request: the verdict on the group stands, never re-asked for a merge."""
    home.mkdir()
    dry = answer_book(EmbeddingCache(path=home / "embeddings.db"), dry_run=True)
    applied = answer_book(EmbeddingCache(path=home / "store-cache.db"), dry_run=False)
    assert dry is not None and applied is not None
    messages_server.enqueue(tool_use_reply(TOOL_NAME, {**ANSWER, "relation": "complement"}))
    c = _make(messages_server, emb)
    for book in (dry, applied, applied):
        with pytest.raises(ConsolidationError) as info:
            c.consolidate(PAIR, answers=book)
        assert info.value.code == "KEEP_APART"
    assert len(messages_server.message_requests) == 1


# -- 8. fanout.py config_params: a child's cutoff is the parent's, not "now" again -------------
def test_a_child_of_a_run_without_a_fixed_now_gets_the_parents_cutoff(home: Path) -> None:
    """A run started without ``now`` pins its cutoff into its children's parameters: a child
    derives the same cutoff, and so the same run id (invariant 4: children never fork)."""
    home.mkdir()
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([gate_rec("a-1", "facts", "Likes tea.")])
    config = RunConfig(dry_run=True, store=f"sqlite:///{home / 'memlife.db'}")
    parent = start_run(config)
    child = fanout.config_from_params(fanout.config_params(config, parent))
    assert config.now is None and child.now == parent.cutoff


# -- 9. deadline.py DeadlineTransport: no kept-alive connection escapes the header deadline ----
class _RejectThenDrip(_Quiet):
    protocol_version = "HTTP/1.1"  # the connection is offered for reuse
    served = 0

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("content-length", 0)))
        type(self).served += 1
        if type(self).served == 1:
            body = b'{"type": "error", "error": {"type": "invalid_request_error", "message": "x"}}'
            self.send_response(400)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        _drip(self, b"HTTP/1.1 200 OK\r\nx-pad: " + b"a" * 400, 1)  # the status line, never done


def test_a_second_request_s_trickling_headers_end_at_its_deadline(emb: MiniLMEmbedder) -> None:
    """The header deadline shuts the socket its request opened: a request that reused an
    earlier request's connection would have none to shut and trickle on (80 s here)."""
    with _serve(_RejectThenDrip) as server:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        c = AnthropicConsolidator(model="claude-haiku-4-5", base_url=url, api_key="sk-ant-fake",
                                  embedder=emb, max_retries=0, timeout=1.5)  # fmt: skip
        with pytest.raises(ConsolidationError) as first:
            c.consolidate(PAIR)
        assert first.value.code == "MODEL_REJECTED"
        t0 = time.monotonic()
        with pytest.raises(ConsolidationError) as info:
            c.consolidate(PAIR)
        took = time.monotonic() - t0
    assert info.value.code == "MODEL_UNAVAILABLE" and info.value.retryable
    assert took < 6, took


# -- 10. inputs.py number_in: a bool is no number --------------------------------------------
def test_a_bool_confidence_or_threshold_is_refused_by_name(
    tmp_path: Path, emb: MiniLMEmbedder
) -> None:
    """``confidence=True`` or ``threshold=True`` (a flag passed where a number goes) is an
    InputError naming the field; nothing is stored."""
    store = SqliteStore(tmp_path / "memlife.db")
    mem = LongTermMemory(store, embedder=emb, ledger=AccessLedger(tmp_path / "ledger"))
    try:
        with pytest.raises(InputError, match="confidence must be a number"):
            mem.remember("u1", NS, None, "Has a dog named Rex.", confidence=True)
        assert store.count() == 0
        with pytest.raises(InputError, match="threshold must be a cosine"):
            mem.recall("u1", "dog", threshold=True)
    finally:
        mem.close()
        store.close()


# -- 11. sqlite.py _REFRESH: a refresh writes only a row that is still active ------------------
def test_a_refresh_never_touches_a_record_no_longer_active(tmp_path: Path) -> None:
    """A duplicate's refresh that lands after the record was superseded (a run between the
    read and the write) is refused, so remember looks again and stores the fact."""
    store = SqliteStore(tmp_path / "memlife.db")
    try:
        old = gate_rec("a-1", "facts", "Likes tea.")
        new = gate_rec("a-2", "facts", "Likes green tea.")
        store.put_many([old, new])
        store.set_status(["a-1"], Status.superseded, replaced_by="a-2")
        before = store.get("a-1")
        assert before is not None and before.status is Status.superseded
        assert not store.refresh_active("a-1", before.sha256, Refresh(at=NOW, confidence=1.0))
        assert store.get("a-1") == before
    finally:
        store.close()
