"""`memlife erase --subject K` reads only subjects a person gave (session 40): where memlife
inferred K for records saved without one (what `hold place --subject K` also counts), the
"nothing matched" refusal names those records, so that an operator erasing a person's data
is not told "nothing" while their records stay."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memlife.inferred import InferredSubjects
from memlife.model import MemoryRecord
from memlife.stores.sqlite import SqliteStore
from tests.support.cli import invoke

NOW = datetime(2026, 6, 1, tzinfo=UTC)
NS = "/users/u-1/facts"


def rec(rid: str, content: str, **kw: Any) -> MemoryRecord:
    base = dict(id=rid, actor_id="u-1", namespace=NS, memory_type="semantic", content=content,
                owner="team-a", created_at=NOW - timedelta(days=50))  # fmt: skip
    return MemoryRecord.model_validate({**base, **kw})


def test_an_erase_by_a_subject_only_inferred_names_the_records_it_did_not_read(
    home: Path,
) -> None:
    """Attacks ``_inferred_hint`` in `memlife/cli/erase.py`: the refusal (exit 1, nothing
    run) names the records whose inferred subject is the one asked, and only the asking
    actor's; a subject nobody has gets the plain refusal."""
    db = home / "memlife.db"
    with SqliteStore(db) as store:
        store.put_many([rec("m-1", "Carries an EpiPen."), rec("m-2", "Runs on Sundays."),
                        rec("o-1", "Carries an EpiPen too.", actor_id="u-2",
                            namespace="/users/u-2/facts")])  # fmt: skip
        table = InferredSubjects.for_store(store)
        table.put("u-1", NS, {"m-1": "allergy", "m-2": "running"}, "remember")
        table.put("u-2", "/users/u-2/facts", {"o-1": "allergy"}, "remember")
    code, _, err = invoke("erase", "--store", f"sqlite:///{db}", "--actor", "u-1",
                          "--subject", "Allergy", "--yes")  # fmt: skip
    assert code == 1
    assert "nothing matched" in err and "inferred subject" in err
    assert "m-1" in err and "m-2" not in err and "o-1" not in err
    code, _, err = invoke("erase", "--store", f"sqlite:///{db}", "--actor", "u-1",
                          "--subject", "cooking", "--yes")  # fmt: skip
    assert code == 1 and "nothing matched" in err and "inferred" not in err
    with SqliteStore(db) as store:  # nothing erased
        assert all(store.get(i) is not None for i in ("m-1", "m-2", "o-1"))


def test_erase_inferred_erases_what_its_preview_named_and_only_that(home: Path) -> None:
    """`erase --subject K --inferred` (session 41) reads the subjects memlife inferred, as
    `hold place --subject K` does: its preview names each such record as inferred, nothing
    changes without --yes, and with --yes exactly the asking actor's records on K go (a
    given subject K too), with a receipt; another actor's record inferred K and the
    actor's records on other subjects stay. --inferred without --subject is refused."""
    db = home / "memlife.db"
    with SqliteStore(db) as store:
        store.put_many([rec("m-1", "Carries an EpiPen."), rec("m-2", "Runs on Sundays."),
                        rec("m-3", "Allergic to peanuts.", subject="allergy"),
                        rec("o-1", "Carries an EpiPen too.", actor_id="u-2",
                            namespace="/users/u-2/facts")])  # fmt: skip
        table = InferredSubjects.for_store(store)
        table.put("u-1", NS, {"m-1": "allergy", "m-2": "running"}, "remember")
        table.put("u-2", "/users/u-2/facts", {"o-1": "allergy"}, "remember")
    base = ("erase", "--store", f"sqlite:///{db}", "--actor", "u-1", "--subject", "Allergy")
    code, out, err = invoke(*base, "--inferred", "--json")
    assert code == 0, err
    assert "m-1" in out and "inferred subject" in out and "m-3" in out
    assert "m-2" not in out and "o-1" not in out
    with SqliteStore(db) as store:  # a preview changes nothing
        assert all(store.get(i) is not None for i in ("m-1", "m-2", "m-3", "o-1"))
    code, out, err = invoke(*base, "--inferred", "--yes", "--json")
    assert code == 0, err
    with SqliteStore(db) as store:
        assert store.get("m-1") is None and store.get("m-3") is None
        assert store.get("m-2") is not None and store.get("o-1") is not None
    assert list((home / "receipts").rglob("*.json")), "an erasure leaves a receipt"
    code, _, err = invoke("erase", "--store", f"sqlite:///{db}", "--actor", "u-1",
                          "--id", "m-2", "--inferred", "--yes")  # fmt: skip
    assert code != 0 and "--subject" in err
    with SqliteStore(db) as store:
        assert store.get("m-2") is not None
