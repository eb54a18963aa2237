"""Audit 49x1: the gate's shadow recall against online recall, for a record longer than
the text the online index reads.

Online recall's shard index reads the first ``ANALYSIS_WINDOW`` characters of a record
for its BM25 terms and speakers (``memlife.online.index``: bounded work per record); a
record can be longer (``limits.content_max_bytes`` goes up to 16 MiB, imports from before
the bound, a remote store). The gate's ``ShadowRecall`` says it ranks "as
``LongTermMemory.recall`` does", and every verdict rests on that. Real SQLite store, the
bundled MiniLM, no mocks.
"""

from __future__ import annotations

from pathlib import Path

from memlife.gate import ShadowRecall
from memlife.ledger import AccessLedger
from memlife.model import MemoryRecord
from memlife.online.index import ANALYSIS_WINDOW
from memlife.online.memory import LongTermMemory
from memlife.stores.sqlite import SqliteStore
from tests.support.records import good

NS = "/users/u-1/facts"
QUERY = "Where is the passport?"
# A long, on-topic preamble two records share (a pasted checklist, a quoted thread):
# past ANALYSIS_WINDOW characters, so what tells the records apart lies beyond it.
HEAD = "Where is the travel ID? I keep travel papers safe. " * 1400


def _put(store: SqliteStore, rid: str, content: str) -> None:
    rec = MemoryRecord.model_validate(good(rid, namespace=NS, content=content, subject=None))
    assert not store.put_many([rec]).failed


def _both(home: Path, contents: dict[str, str]) -> tuple[list[str], list[str]]:
    """(online recall's ids, the gate's ids) for QUERY over these records, best first."""
    with SqliteStore(home / "memlife.db") as store:
        for rid, content in contents.items():
            _put(store, rid, content)
        memory = LongTermMemory(store, ledger=AccessLedger(home / "ledger"))
        try:
            online = [h.record.id for h in memory.recall("u-1", QUERY, k=3, log=False)]
        finally:
            memory.close()
        gate = [r.id for r in ShadowRecall(store).recall(QUERY, "u-1", k=3)]
    return online, gate


def test_the_gate_ranks_a_long_record_as_online_recall_does(home: Path) -> None:
    """Two records alike in their first 64 KiB (so alike to online recall), told apart
    only by a sentence after it. Online recall cannot see that sentence; the gate's BM25
    did, so the gate put the other record first: a must-retain case at k=1 passed in the
    gate while the agent is served the other record."""
    assert len(HEAD) > ANALYSIS_WINDOW
    online, gate = _both(
        home,
        {
            "m-a": HEAD + "The umbrella hangs in the hall.",
            "m-b": HEAD + "The passport is in the blue drawer.",
        },
    )
    assert online[0] == "m-a"  # a tie for what online reads: by id
    assert gate == online


def test_control_short_records_rank_the_same_in_the_gate_and_online(home: Path) -> None:
    online, gate = _both(
        home,
        {
            "m-a": "The umbrella hangs in the hall.",
            "m-b": "The passport is in the blue drawer.",
            "m-c": "Travel papers are kept in the study desk.",
        },
    )
    assert online and online[0] == "m-b"
    assert gate == online
