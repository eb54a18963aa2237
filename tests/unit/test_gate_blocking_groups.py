"""gate.blocking_groups: which staged groups block the supersedes (the memo keeps them).

Recall is a stand-in here (a view is the records not excluded, plus the replacements not
excluded; ids only), so that each rule of the naming can be pinned down: a group alone,
two groups only together, a group of another actor, and the safety net (the gate re-run
without the named groups still blocks: none is named).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pytest

from memlife import gate as gate_mod
from memlife.evalset import EvalCase
from memlife.gate import blocking_groups, run_set
from memlife.model import MemoryRecord
from memlife.policy import GatePolicy
from tests.support.gate import rec

RECORDS = [rec("a1", "facts", "alpha"), rec("b1", "facts", "beta"), rec("c1", "facts", "gamma"),
           rec("x1", "facts", "other actor", actor="u-2")]  # fmt: skip
# lossy replacements: they supersede nothing in provenance, so a case needing a1 loses it
REPLACEMENTS = {
    "rA": rec("rA", "facts", "alpha merged"),
    "rB": rec("rB", "facts", "beta merged"),
    "rX": rec("rX", "facts", "other merged", actor="u-2"),
}


class ViewRecall:
    """Every active record of the actor in the view (no ranking): enough for id targets."""

    def __init__(self, ignore_namespace: bool = False) -> None:
        self.ignore_namespace = ignore_namespace

    def recall(self, query: str, actor: str, namespace: str | None = None, *, k: int = 5,
               threshold: float | None = None, exclude: Iterable[str] = (),
               include: Iterable[str] = (), plus: bool = False) -> list[MemoryRecord]:  # fmt: skip
        pool = RECORDS + (list(REPLACEMENTS.values()) if plus else [])
        ex = set(exclude)
        return [
            r for r in pool
            if r.id not in ex and r.actor_id == actor
            and (namespace is None or self.ignore_namespace or r.namespace == namespace)
        ][:k]  # fmt: skip

    def lineage(self, record: MemoryRecord, gone: frozenset[str] = frozenset()) -> set[str]:
        return {record.id}


def case(cid: str, targets: list[str], min_result: float = 1.0, **kw: Any) -> EvalCase:
    return EvalCase(id=cid, query="q", actor_id=kw.pop("actor", "u-1"), must_retrieve=targets,
                    min_result=min_result, impact="high", k=10, **kw)  # fmt: skip


def named(cases: Sequence[EvalCase], groups: list[tuple[str, list[str]]], **kw: Any) -> list[str]:
    gate = GatePolicy()
    recall = ViewRecall(**kw)
    scope = {rid: (r.actor_id, r.namespace) for rid, r in REPLACEMENTS.items()}
    before = run_set(cases, recall, gate)  # type: ignore[arg-type]

    def after(exclude: frozenset[str], subset: Sequence[EvalCase]) -> dict[str, Any]:
        return run_set(subset, recall, gate, exclude=exclude, plus=True)  # type: ignore[arg-type]

    return blocking_groups(cases, gate, before, groups, scope, after)


GROUPS = [("rA", ["a1"]), ("rB", ["b1"]), ("rX", ["x1"])]


def test_the_group_that_loses_a_needed_record_is_named_alone() -> None:
    assert named([case("needs-a", ["a1"])], GROUPS) == ["rA"]
    assert named([case("needs-a", ["a1"]), case("needs-b", ["b1"])], GROUPS) == ["rA", "rB"]


def test_groups_that_block_only_together_are_named_together() -> None:
    either = case("a-or-b", ["a1", "b1"], min_result=0.5)  # one of the two is enough
    assert named([either], GROUPS) == ["rA", "rB"]  # neither alone, both of this actor


def test_more_suspects_than_can_be_tried_alone_names_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gate_mod, "MAX_TRIED_ALONE", 1)
    assert named([case("needs-a", ["a1"])], GROUPS) == []  # rA and rB are both suspects
    assert named([case("needs-x", ["x1"], actor="u-2")], GROUPS) == ["rX"]  # one: tried


def test_a_group_of_another_actor_is_never_named() -> None:
    assert "rX" not in named([case("needs-a", ["a1"])], GROUPS)
    assert named([case("needs-x", ["x1"], actor="u-2")], GROUPS) == ["rX"]


def test_when_the_named_groups_do_not_explain_the_block_none_is_named() -> None:
    # needs-b names a namespace no group is in, yet (this recall ignores it) rB still moves
    # it: rA is named for needs-a, the re-run without rA still blocks, so none is named
    needs_b = case("needs-b", ["b1"], namespace="/users/u-1/elsewhere")
    assert named([case("needs-a", ["a1"]), needs_b], GROUPS, ignore_namespace=True) == []
    assert named([case("needs-a", ["a1"])], GROUPS, ignore_namespace=True) == ["rA"]
