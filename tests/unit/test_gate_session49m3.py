"""Audit 49m3 (session 49, mutation pass): the gate's ``answers_unchecked`` and
``_forbidden_elsewhere`` (audit 49iii), pinned where session 49's own tests left a hand
mutation alive. Real pipeline, SQLite store, the local Messages API fake."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memlife.erase import erase
from memlife.pipeline import RunConfig, run_local
from memlife.stores.sqlite import SqliteStore
from tests.support.gate import ACTOR, NOW, rec, write_cases

TEA = [rec(f"m-tea-{i}", "preferences", "Drinks green tea every morning.", subject="beverage",
           age=age) for i, age in ((1, 60), (2, 30))]  # fmt: skip
QUERY = "What does the user drink?"
DOG = rec("m-dog", "facts", "Has a dog named Rex.", subject="pet", age=30)


def _seed(home: Path, records: list[Any]) -> SqliteStore:
    home.mkdir(exist_ok=True)
    store = SqliteStore(home / "memlife.db")
    store.put_many(records)
    return store


def _receipt_gate(location: str | None) -> dict[str, Any]:
    assert location is not None
    return dict(json.loads(Path(location.removeprefix("file://")).read_text())["gate"])


def test_a_case_without_an_answer_check_is_no_unchecked_answer(home: Path, tmp_path: Path) -> None:
    """A case that asks for no answer (must_retrieve / forbidden only) has no answer check to
    miss: the verdict passes and names nothing unchecked (kills "no answer counts as an
    unchecked one", which would turn every such night into a warn)."""
    _seed(home, [*TEA, DOG]).close()
    cases = write_cases(tmp_path / "cases.yaml", [
        {"id": "tea", "query": QUERY, "actor_id": ACTOR, "must_retrieve": ["m-tea-2"]},
    ])  # fmt: skip

    summary = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases))

    gate = _receipt_gate(summary.receipt)
    assert gate["answers_unchecked"] == []
    assert gate["status"] == "pass", gate


def test_a_forbidden_id_the_actor_erased_and_another_actor_took_still_gates(
    home: Path, tmp_path: Path
) -> None:
    """u-1 erased m-x; u-2 then took the id for a record of its own. u-1's case forbids m-x
    (an erasure watch): u-1's tombstone makes it a check, not a case copied from u-2 (kills
    both "the tombstone ignored" and "the tombstone looked up for the record's actor")."""
    store = _seed(home, [*TEA, rec("m-x", "facts", "Has a secret.", subject="secret", age=50)])
    assert erase(store, ACTOR, ids=["m-x"], now=NOW)["erased"] == ["m-x"]
    store.put_many([rec("m-x", "facts", "Has a cat named Tom.", subject="pet", actor="u-2")])
    assert (got := store.get("m-x")) is not None and got.actor_id == "u-2"
    store.close()
    cases = write_cases(tmp_path / "cases.yaml", [
        {"id": "watch", "query": QUERY, "actor_id": ACTOR, "forbidden": ["m-x"]},
    ])  # fmt: skip

    summary = run_local(RunConfig(dry_run=False, now=NOW, eval_cases=cases))

    assert (summary.gate or {})["uncovered_cases"] == []
    assert summary.lifecycle["superseded"] == 2
