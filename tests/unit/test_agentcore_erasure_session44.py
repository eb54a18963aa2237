"""Audit 44c (session 44): what an erasure leaves behind on an AgentCore store.

On SQLite everything erasure cleans lives in the store's one file, which ``erase``
compacts. On AgentCore (state on this machine: no ``MEMLIFE_STATE``) the journal is
``$MEMLIFE_HOME/journal.db`` and record overflow lives in the DynamoDB sidecar.

1. The journal's WAL. A night stages a replacement copying the newest record's text (its
   ``write_replacement`` payload, in the home's journal). Erasing that record forgets the
   payload (the row is rewritten, secure_delete zeroes the old cell), but the WAL frames
   that wrote it stay: ``erase.compact`` folds the store's file and the caches only, not
   the home's journal. The erased text sits in ``journal.db-wal`` for as long as any
   process keeps the journal open.

2. The sidecar's overflow blobs. An owner that does not fit AgentCore metadata (here an
   accented word) lives in the record's sidecar blob; the sidecar keeps the last four
   blobs of a record (``writes.KEEP_BLOBS``). Erasing the merge's newest member rebuilds
   the replacement with the kept member's owner (audit 43o), but the replacement's item
   still holds the old blob: the erased record's owner, in DynamoDB, for good.

3. (held; a weak spot of the suite) the erased text's vector in the home's embedding cache
   and its WAL: no test failed when ``erase.compact`` skipped the caches' files.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memlife.erase import erase
from memlife.journal import open_journal
from memlife.model import MemoryRecord, MemoryType, Status, content_sha256
from memlife.pipeline import RunConfig, run_local
from tests.fakes.agentcore import agentcore_store
from tests.support.lifecycle import gate_cases

NOW = datetime(2026, 11, 1, 12, tzinfo=UTC)
NS = "/users/u-1/facts"
MARKER = "zqxcanary44c"


def rec(rid: str, content: str, age: float, owner: str) -> MemoryRecord:
    return MemoryRecord(
        id=rid,
        actor_id="u-1",
        namespace=NS,
        memory_type=MemoryType.semantic,
        content=content,
        subject="city",
        owner=owner,
        created_at=NOW - timedelta(days=age),
    )


@pytest.fixture()
def merged(home: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, str]]:
    """An AgentCore store (fake + moto sidecar) after a night merged ``m-a`` (newest: its
    text and owner carry the marker) and ``m-b``: (store, the replacement's id)."""
    with agentcore_store() as (store, _fake):
        monkeypatch.setattr("memlife.pipeline.open_store", lambda url=None: store)
        monkeypatch.setattr(store, "close", lambda: None)  # the runs share this store
        store.put_many([
            rec("m-a", f"The user lives in Berlin, {MARKER} street.", 10, f"équipe-{MARKER}"),
            rec("m-b", "The user lives in Paris.", 100, "team-b"),
        ])  # fmt: skip
        cases = gate_cases(home / "cases.db", records=list(store.iter_all()))
        config = RunConfig(dry_run=False, now=NOW, store="agentcore://m", eval_cases=cases)
        assert run_local(config).status == "success"
        (repl,) = [r for r in store.iter_all() if r.id.startswith("r-")]
        assert repl.status is Status.active and MARKER in repl.content
        yield store, repl.id


def files_holding(root: Path, needle: str) -> list[str]:
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("*")
        if p.is_file() and needle.encode() in p.read_bytes()
    )  # fmt: skip


def test_an_erased_replacement_payload_leaves_the_home_journals_wal(
    home: Path, merged: tuple[Any, str]
) -> None:
    """The adversary reads the journal files under MEMLIFE_HOME of a worker that is still
    running after `erase` returned (its journal open, as a worker's or an agent's is).
    Erasing the merged record by id must leave its text in no file there: the staged
    replacement's payload is forgotten, and the WAL frames that held it must go too."""
    store, repl_id = merged
    journal = open_journal(store)  # the process keeps its journal open
    assert "journal.db-wal" in files_holding(home, MARKER)  # the staged payload, before
    result = erase(store, "u-1", ids=["m-a"], now=NOW)
    assert result["status"] == "success" and result["rebuilt"] == [repl_id]
    assert result["compaction"]["vacuumed"] is True
    assert all(o.payload is None for o in journal.for_record(repl_id))
    assert files_holding(home, MARKER) == []


def test_a_rebuilt_replacement_keeps_no_overflow_blob_of_the_erased_source(
    home: Path, merged: tuple[Any, str]
) -> None:
    """The adversary gives a record an owner AgentCore metadata cannot hold (it goes to the
    sidecar blob), lets a night merge it (the replacement takes that owner), then erases
    it by id. The rebuilt replacement takes the kept source's owner; no sidecar item may
    still hold the erased owner."""
    import boto3

    store, repl_id = merged
    result = erase(store, "u-1", ids=["m-a"], now=NOW)
    assert result["status"] == "success" and result["rebuilt"] == [repl_id]
    after = store.get(repl_id)
    assert after is not None and after.owner == "team-b" and MARKER not in after.content
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    items = ddb.scan(TableName=store.sidecar.table)["Items"]
    assert [i["pk"]["S"] for i in items if MARKER in json.dumps(i, ensure_ascii=False)] == []


def test_an_erased_texts_vector_leaves_the_home_embedding_cache_and_its_wal(
    home: Path, merged: tuple[Any, str]
) -> None:
    """The adversary reads ``$MEMLIFE_HOME/embeddings.db`` and its WAL (an AgentCore store's
    vectors) in a process still running after `erase`: the erased text's vector, which the
    night stored there, must be in neither (erase.compact folds and truncates the caches'
    files, not only the store's)."""
    store, _ = merged
    erased = store.get("m-a")
    assert erased is not None
    con = sqlite3.connect(home / "embeddings.db")
    q = "SELECT vector FROM embeddings WHERE content_sha256=?"
    (blob,) = con.execute(q, (content_sha256(erased.content),)).fetchone()
    con.close()
    needle = bytes(blob[64:96])  # 8 float32 of the erased text's vector
    assert any(needle in p.read_bytes() for p in home.glob("embeddings.db*"))  # before
    assert erase(store, "u-1", ids=["m-a"], now=NOW)["status"] == "success"
    assert [p.name for p in home.glob("embeddings.db*") if needle in p.read_bytes()] == []
