"""A starter evaluation set drawn from the store: what the planner sees, as questions.

Kept apart from ``memlife.evalset`` (the case format) because validating a starter case
runs it through the regression gate's recall, and the gate reads the case format: the
format module must not import the gate.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import datetime
from functools import partial
from typing import Any

from memlife.evalset import CaseKind, EvalCase, Impact, Target
from memlife.gate import ShadowRecall, run_case
from memlife.model import MemoryType, Status
from memlife.text import normalise


def _topic(r: Any) -> str:
    raw = r.subject or r.namespace.rstrip("/").rsplit("/", 1)[-1] or "this"
    return " ".join(raw.replace("_", " ").replace("-", " ").split())


def question_for(r: Any) -> str:
    """A question an agent would ask, from the memory type and subject (never the text)."""
    topic = _topic(r)
    if r.memory_type is MemoryType.procedural:
        return f"What are the steps for {topic}?"
    if r.memory_type is MemoryType.episodic:
        return f"What happened regarding {topic}?"
    if "preference" in r.namespace:
        return f"What is the user's current preference for {topic}?"
    return f"What do we know about the user's {topic}?"


def erasure_cases(sink: Any, actors: Sequence[str] | None = None) -> list[EvalCase]:
    """One ``erased`` case per erased record in the receipts: ids only (the receipt has no
    content). Recall over the whole namespace (k=100, any similarity) must never return it."""
    out: dict[tuple[str, str, str], EvalCase] = {}  # record ids are unique per actor only
    for key in sink.list("operations/"):
        doc = json.loads(sink.get(key) or b"{}")
        if doc.get("action") != "erase" or doc.get("outcome") in (None, "failed"):
            continue
        scope = doc.get("scope") or {}
        actor, ns, rid = scope.get("actor_id"), scope.get("namespace"), doc.get("record_id")
        if not (actor and ns and rid) or (actors is not None and actor not in actors):
            continue
        leaf = ns.rstrip("/").rsplit("/", 1)[-1].replace("_", " ") or "memories"
        out.setdefault(
            (actor, ns, rid),
            EvalCase(
                id=f"erased-{actor}-{rid}",
                kind=CaseKind.erased,
                actor_id=actor,
                namespace=ns,
                query=f"What do we know about the user's {leaf}?",
                forbidden=[Target(id=rid)],
                k=100,
                threshold=-1.0,
            ),
        )
    return unique_ids([out[k] for k in sorted(out)])


def unique_ids(cases: list[EvalCase]) -> list[EvalCase]:
    """Each case id once: ids join an actor and a record id with "-", which both may hold
    ("u-1" + "x" and "u" + "1-x"), and a set naming an id twice is refused by every load.
    A repeat gets a digest of its actor, namespace and id (the same on every init)."""
    seen: set[str] = set()
    out = []
    for c in cases:
        if c.id in seen:
            key = "\x1f".join((c.actor_id, c.namespace or "", c.id))
            c = c.model_copy(
                update={"id": f"{c.id}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"}
            )
        seen.add(c.id)
        out.append(c)
    return out


def starter_cases(
    store: Any,
    *,
    policy: Any = None,
    now: datetime | None = None,
    actors: int = 5,
    actor_ids: Sequence[str] = (),
    per_kind: int = 2,
    sink: Any = None,
    validate: bool = True,
) -> list[EvalCase]:
    """Cases for the first ``actors`` actors (or ``actor_ids``), from what the planner sees.

    recent_preference: the newest statement of a changed preference (or the newest
    preference) must be retrieved; superseded_fact: the older statements it supersedes
    (and ones already superseded) must not be; expired_fact: a hard-expired record must
    not be shown; procedure: an active procedural instruction must be retrieved (high
    impact); erased: an erased record (from the erasure receipts in ``sink``) must never
    come back. Queries are questions from templates per memory type and subject, never
    the stored text. A record with an ``expires_at`` is never a must-retrieve target: its
    hard expiry is an obligation, and the case would fail from then on. With ``validate``, a must-retrieve case that fails on the store as it
    is now is dropped: a regression case must pass before it can catch a regression.
    """
    from memlife.model import utcnow
    from memlife.plan import Action, Planner
    from memlife.policy import load_policy
    from memlife.stores.base import iter_shard

    policy = policy or load_policy()
    planner = Planner(policy, now or utcnow())
    chosen = list(actor_ids) or [
        a for _, a in zip(range(actors), store.list_actors(), strict=False)
    ]
    cases: list[EvalCase] = []
    counts: dict[tuple[str, CaseKind], int] = {}
    recall = None
    deleting: set[str] = set()  # the night's deletion candidates: its gate still reads them
    if validate:  # as the gate reads the store: what online recall never serves answers nothing
        from memlife.consolidate.replacement import past_lifetime

        ttl, at = policy.ttl_days(), planner.now
        recall = ShadowRecall(
            store, hidden=lambda r: r.id not in deleting and past_lifetime(r, ttl, at)
        )

    expiring: set[str] = set()  # records with a deadline

    def add(case: EvalCase) -> None:
        if (case.actor_id, case.kind) in counts and counts[(case.actor_id, case.kind)] >= per_kind:
            return
        if any(t.id in expiring for t in case.must_retrieve):
            return  # its hard expiry would fail the case (and hold its actor's deletions) nightly
        if recall is not None and case.must_retrieve:
            if not run_case(case, recall)["passed"]:
                return  # the question does not find it today: not a baseline worth keeping
        counts[(case.actor_id, case.kind)] = counts.get((case.actor_id, case.kind), 0) + 1
        cases.append(case)

    for actor in chosen:
        for ns in store.list_namespaces(actor):
            records = {r.id: r for p in iter_shard(store, actor, ns) for r in p.records}
            active = {i: r for i, r in records.items() if r.status is Status.active}
            expiring.update(i for i, r in active.items() if r.expires_at is not None)

            new_case = partial(EvalCase, actor_id=actor, namespace=ns)
            decisions = planner.plan_shard([[_view(r) for r in active.values()]])
            deleting.update(d.id for d in decisions if d.action in DELETES)
            # Changed preferences: survivor must be retrieved, its superseded statements not.
            survivors: dict[str, list[str]] = {}
            for d in decisions:
                if d.action is Action.supersede_candidate and d.survivor:
                    survivors.setdefault(d.survivor, []).append(d.id)
            for sid, olds in sorted(survivors.items()):
                head = active.get(sid)
                if head is None or head.memory_type is not MemoryType.semantic:
                    continue
                # ids reach receipts (which hold no content): never the subject's words
                stale = [
                    o
                    for o in sorted(olds)
                    if normalise(active[o].content) != normalise(head.content)
                ]
                add(
                    new_case(
                        id=f"pref-{actor}-latest-{sid}",
                        kind=CaseKind.recent_preference,
                        query=question_for(head),
                        must_retrieve=[Target(id=sid)],
                    )
                )
                if stale:
                    add(
                        new_case(
                            id=f"stale-{actor}-latest-{sid}",
                            kind=CaseKind.superseded_fact,
                            query=question_for(head),
                            forbidden=[Target(id=o) for o in stale[:3]],
                        )
                    )
            # Statements already superseded by an earlier run must stay out of recall.
            for r in sorted(records.values(), key=lambda r: r.id):
                if r.status is Status.superseded:
                    add(
                        new_case(
                            id=f"stale-{actor}-{r.id}",
                            kind=CaseKind.superseded_fact,
                            query=question_for(r),
                            forbidden=[Target(id=r.id)],
                        )
                    )
            prefs = sorted(
                (
                    r
                    for r in active.values()
                    if r.memory_type is MemoryType.semantic and "preference" in ns
                ),
                key=lambda r: (r.created_at, r.id),
            )
            for r in reversed(prefs[-per_kind:]):  # the newest preferences
                add(
                    new_case(
                        id=f"pref-{actor}-{r.id}",
                        kind=CaseKind.recent_preference,
                        query=question_for(r),
                        must_retrieve=[Target(id=r.id)],
                    )
                )
            for d in decisions:
                r = active[d.id]
                if d.action is Action.delete_expired:
                    add(
                        new_case(
                            id=f"expired-{actor}-{d.id}",
                            kind=CaseKind.expired_fact,
                            query=question_for(r),
                            forbidden=[Target(id=d.id)],
                        )
                    )
                elif r.memory_type is MemoryType.procedural and d.action not in DELETES:
                    add(
                        new_case(
                            id=f"proc-{actor}-{d.id}",
                            kind=CaseKind.procedure,
                            query=question_for(r),
                            must_retrieve=[Target(id=d.id)],
                            impact=Impact.high,
                        )
                    )
    if sink is not None:  # every erased record of every erased actor (by default): no cap
        from memlife.tombstones import listing

        erased: dict[str, set[str | None]] = {}  # per actor, the ids this store erased (read once)
        for c in erasure_cases(sink, list(actor_ids) or None):
            rid = c.forbidden[0].id or ""
            live = store.get(rid)
            if live is not None and live.actor_id == c.actor_id:
                if c.actor_id not in erased:
                    erased[c.actor_id] = {t["record_id"] for t in listing(store, c.actor_id)}
                if rid not in erased[c.actor_id]:
                    continue  # another store's erasure (one receipts folder): never erased here
            cases.append(c)
    return unique_ids(cases)


DELETES = frozenset({"delete_expired", "delete_pending"})


def _view(r: Any) -> Any:
    from memlife.model import plan_view

    return plan_view(r)
