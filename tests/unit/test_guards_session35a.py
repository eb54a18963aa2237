"""Session 35: a near duplicate's refresh is tied to the words it compared.

``remember`` compares a near duplicate's words with the new fact (``restates``), then
refreshes that record: verified, confidence raised, access counted. Another writer that
rewrote the record between the comparison and the refresh's read got the refresh anyway:
"Prefers an aisle seat" marked verified by "Prefers window seats". The refresh is now
conditional on the hash of the text compared, so the rewritten record is left as its
writer left it and the fact is stored anew."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import memlife.online.memory as online
from memlife.ledger import AccessLedger
from memlife.model import Source, content_sha256
from memlife.online.memory import LongTermMemory
from memlife.stores.sqlite import SqliteStore

NS = "/users/u1/facts"
SAID = "Prefers a window seat on flights."
AGAIN = "Prefers window seats on flights."  # the same words (memlife/restate.py)
REWRITTEN = "Prefers an aisle seat on flights."  # what the other writer leaves


@pytest.fixture()
def mem(home: Path) -> Iterator[tuple[LongTermMemory, Path]]:
    home.mkdir(parents=True, exist_ok=True)
    store = SqliteStore(home / "m.db")
    m = LongTermMemory(store, ledger=AccessLedger(home / "ledger"))
    yield m, home / "m.db"
    m.close()
    store.close()


def test_a_record_rewritten_after_the_comparison_is_not_refreshed(
    mem: tuple[LongTermMemory, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    m, path = mem
    rid = m.remember("u1", NS, None, SAID, source=Source.agent_inferred, confidence=0.5).record_id
    before = m.store.get(rid)
    assert before is not None and before.last_verified_at is None

    real = online.restates
    fired: list[str] = []

    def compare_then_rewrite(old: str, new: str) -> bool:
        same = real(old, new)
        if not fired:  # another connection rewrites the record right after the comparison
            fired.append(old)
            with SqliteStore(path) as other:
                rec = other.get(rid)
                assert rec is not None
                prov = rec.provenance.model_copy(
                    update={"content_sha256": content_sha256(REWRITTEN)}
                )
                other.put_many([rec.model_copy(update={"content": REWRITTEN, "provenance": prov})])
        return same

    monkeypatch.setattr(online, "restates", compare_then_rewrite)
    got = m.remember("u1", NS, None, AGAIN, source=Source.user_stated, confidence=1.0)
    assert fired == [SAID]  # the comparison ran on the words first read

    after = m.store.get(rid)
    assert after is not None and after.content == REWRITTEN
    # the other writer's record is as it left it: no verification, count or confidence
    assert after.last_verified_at is None
    assert after.access_count == before.access_count
    assert after.confidence == before.confidence
    assert got.created and got.record_id != rid  # the fact is stored in its own words
    kept = m.store.get(got.record_id)
    assert kept is not None and kept.content == AGAIN
    # and the rewritten record is still recalled in its new words
    monkeypatch.undo()
    hits = m.recall("u1", REWRITTEN, k=5, namespace=NS, log=False)
    assert [h.record.content for h in hits if h.record.id == rid] == [REWRITTEN]
