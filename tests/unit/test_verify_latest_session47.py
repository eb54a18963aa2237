"""Session 47 (audit 47a): `receipts verify latest` skips only a run still under way (session 46). A lease
row outlives the run it names when that run was sealed inside a longer lease: a hold release
seals its own run, then erases what the hold deferred under the same lease."""

from __future__ import annotations

from pathlib import Path

import pytest

import memlife.erase as erasure
from memlife import run_chain
from memlife.audit import open_sink
from memlife.erase import erase, release_hold
from memlife.journal import open_journal
from memlife.model import RetentionClass
from memlife.stores.sqlite import SqliteStore
from tests.unit.test_erase import NOW, rec
from tests.unit.test_verify_latest_session46 import _verify_latest


def test_verify_latest_never_skips_a_sealed_run_whose_receipt_is_gone(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An erasure of a held record is deferred (run E). The hold is released: its run HR is
    sealed (the chain's latest), then the deferred erasure starts under the same lease, which
    still names HR. The adversary removes HR's receipt then, and a reviewer runs `receipts
    verify latest`. What must hold: HR is not under way, so it is the run checked, and the
    check fails (not exit 0 on E with HR noted as LATEST_RUN_IN_PROGRESS)."""
    store = SqliteStore(home / "memlife.db")
    store.put_many([rec("x", "Takes lithium every day.", retention=RetentionClass.legal_hold)])
    assert erase(store, "u-1", ids=["x"], now=NOW)["deferred"] == ["x"]
    seen: list[tuple[str, int, dict[str, object]]] = []
    real = erasure._select

    def reviewer_first(*args: object, **kwargs: object) -> object:
        if not seen:  # HR is sealed and the chain's latest; the erasure has not started
            sealed = run_chain.latest(open_journal(store), open_sink())
            (receipt,) = (home / "receipts").glob(f"runs/*/*/*/{sealed}/receipt.json")
            receipt.unlink()
            seen.append((str(sealed), *_verify_latest()))
        return real(*args, **kwargs)

    monkeypatch.setattr(erasure, "_select", reviewer_first)
    release_hold(store, ["x"], now=NOW)
    store.close()
    ((sealed, code, out),) = seen
    assert sealed.startswith("manual-")
    assert code != 0 and out["run_id"] == sealed, out
