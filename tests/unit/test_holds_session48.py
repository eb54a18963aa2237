"""Session 48 (audit 48vi): legal holds across every path (a hold lifted by other means, a hold raced
into a night, typo'd hold commands)."""

from __future__ import annotations

import json
from pathlib import Path

from memlife import tombstones
from memlife.erase import pending_erasures
from memlife.model import MemoryRecord
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke
from tests.support.records import good

PAST = "2026-02-01T00:00:00Z"  # the record's deadline: kept only by its hold


def test_an_erasure_deferred_by_a_hold_an_import_lifts_is_not_lost_to_the_night(
    home: Path, tmp_path: Path
) -> None:
    """The user asks to erase m-x, under legal hold and past its deadline: deferred. The
    operator then re-imports m-x with `import --update --allow-held` (a corrected line,
    retention_class standard): the hold is gone, but the pending erasure is not applied
    (`hold release` applies it at once). The next `memlife run` deletes m-x as expired
    (a delete, not an erasure), and `erase --pending` then forgets the request: no erase
    receipt, no tombstone, so the erased text is accepted again. What must hold: once the
    hold is gone the request is carried out as an erasure (tombstoned, receipted)."""
    home.mkdir(parents=True)
    held = good("m-x", content="Was treated for depression at St. Mary's.",
                retention_class="legal_hold", expires_at=PAST)  # fmt: skip
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([MemoryRecord.model_validate(held)])

    code, out, err = invoke("erase", "--actor", "u-1", "--id", "m-x", "--yes", "--json")
    assert code == 0 and json.loads(out)["deferred"] == ["m-x"], err
    line = tmp_path / "fix.jsonl"
    line.write_text(json.dumps({**held, "retention_class": "standard"}) + "\n")
    code, out, err = invoke("import", str(line), "--update", "--allow-held", "--json")
    assert code == 0 and json.loads(out)["updated"] == 1, err

    code, _, err = invoke("run", "--json")
    assert code in (0, 3), err
    code, _, err = invoke("erase", "--pending", "--yes", "--json")
    assert code == 0, err

    with SqliteStore(home / "memlife.db") as store:
        assert store.get("m-x") is None
        assert pending_erasures(store) == []
        erased = [t["record_id"] for t in tombstones.listing(store, "u-1")]
    assert erased == ["m-x"]  # the request was carried out as an erasure
    receipts = [json.loads(p.read_text()) for p in (home / "receipts").rglob("operations/*.json")]
    assert [(r["action"], r["outcome"]) for r in receipts if r["record_id"] == "m-x"
            and r["action"] in ("erase", "delete")] == [("erase", "deleted")]  # fmt: skip


def test_an_expired_record_held_by_its_retained_status_is_named_not_deleted(home: Path) -> None:
    """Two records past their deadline, one held by `retention_class: legal_hold`, one by
    `status: retained` (a hold too: MemoryRecord.held, docs/evaluation.md). Both are kept;
    the run receipt must record each deferral (DESIGN step 3: "Legal hold -> retained,
    untouched, and the deferral recorded"). Only the legal_hold one was named: an auditor
    reading `ids_not_deleted` could not tell why the retained one outlived its deadline."""
    home.mkdir(parents=True)
    with SqliteStore(home / "memlife.db") as store:
        store.put_many([
            MemoryRecord.model_validate(good("m-h", retention_class="legal_hold", expires_at=PAST)),
            MemoryRecord.model_validate(good("m-r", content="Went to the cinema on Monday.",
                                             status="retained", expires_at=PAST)),
        ])  # fmt: skip
    code, out, err = invoke("run", "--json")
    assert code == 0, err
    receipt = json.loads(Path(json.loads(out)["receipt"]).read_text())
    with SqliteStore(home / "memlife.db") as store:
        assert store.get("m-h") is not None and store.get("m-r") is not None
    assert {r["id"] for r in receipt["ids_not_deleted"]} == {"m-h", "m-r"}
