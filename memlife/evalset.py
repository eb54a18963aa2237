"""Evaluation sets for the regression gate: the file format (YAML or JSONL) and a starter set.

A case says what recall must (and must not) return for one query of one actor:

    id: pref-u-000001-beverage         # unique in the set; the only thing receipts name
    kind: recent_preference            # free label (see CaseKind); informational
    query: "Switched to black coffee every morning"
    actor_id: u-000001
    namespace: /users/u-000001/preferences   # optional: scope recall to one namespace
    must_retrieve: [m-000001-00007, {fact: "black coffee"}]
    forbidden: [m-000001-00003, {claim: "drinks only green tea"}]
    impact: high                       # high | normal; a failed high-impact case blocks deletion
    min_result: 1.0                    # minimum recall@k over must_retrieve for the case to pass
    k: 5

Targets: a bare string is a record id; ``{id: ...}`` the same; ``{fact: ...}`` /
``{claim: ...}`` a piece of text that a retrieved record's content must contain (compared
case- and punctuation-insensitively). An id target is also satisfied by an active
replacement whose ``provenance.supersedes`` names it (transitively): consolidation
keeps a fact without keeping its original record. A forbidden id is matched exactly.
See docs/evaluation.md.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from memlife.errors import EvalSetError as EvalSetError  # moved; re-exported
from memlife.model import MemoryType, Status
from memlife.text import normalise


class Impact(StrEnum):
    high = "high"
    normal = "normal"


class CaseKind(StrEnum):
    recent_preference = "recent_preference"  # the current preference is remembered
    superseded_fact = "superseded_fact"  # a superseded statement is not retrieved
    expired_fact = "expired_fact"  # an expired fact is not shown as active
    procedure = "procedure"  # a procedural instruction is intact
    erased = "erased"  # after erasure the targeted fact cannot be retrieved
    custom = "custom"


class Target(BaseModel):
    """One expected (or forbidden) item: a record id or a piece of text."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str | None = None
    text: str | None = None

    @model_validator(mode="after")
    def _one(self) -> Target:
        if (self.id is None) == (self.text is None):
            raise ValueError("a target is a record id or a fact/claim text, not both or neither")
        if self.text is not None and not normalise(self.text):
            raise ValueError("fact/claim text is blank")
        return self

    @property
    def label(self) -> str:
        """Content-free name for reports: the id, or 'text#n' (texts are never echoed)."""
        return self.id if self.id is not None else "text"

    def dump(self) -> str | dict[str, str]:
        return self.id if self.id is not None else {"fact": self.text or ""}


def _target(value: Any) -> Target:
    if isinstance(value, Target):
        return value
    if isinstance(value, str):
        return Target(id=value)
    if isinstance(value, dict):
        if set(value) == {"id"}:
            return Target(id=str(value["id"]))
        if len(value) == 1 and next(iter(value)) in ("fact", "claim", "text"):
            return Target(text=str(next(iter(value.values()))))
    raise ValueError(
        f"target {value!r}: use a record id, {{id: ..}}, {{fact: ..}} or {{claim: ..}}"
    )


class EvalCase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1, max_length=256)
    query: str = Field(min_length=1)
    actor_id: str = Field(min_length=1)
    namespace: str | None = None
    kind: CaseKind = CaseKind.custom
    must_retrieve: list[Target] = Field(default_factory=list)
    forbidden: list[Target] = Field(default_factory=list)
    impact: Impact = Impact.normal
    min_result: float = Field(default=1.0, ge=0, le=1)
    k: int = Field(default=5, ge=1, le=100)
    threshold: float | None = Field(default=None, ge=-1, le=1)  # cosine floor; None: recall default
    # Optional checks of a model's final answer (run only when a model is configured).
    answer_must_include: list[str] = Field(default_factory=list)
    answer_must_not_include: list[str] = Field(default_factory=list)

    @field_validator("must_retrieve", "forbidden", mode="before")
    @classmethod
    def _targets(cls, v: Any) -> list[Target]:
        if v is None:
            return []
        if not isinstance(v, list):
            v = [v]
        return [_target(x) for x in v]

    @model_validator(mode="after")
    def _something(self) -> EvalCase:
        if not self.must_retrieve and not self.forbidden:
            raise ValueError("a case needs must_retrieve or forbidden targets")
        return self

    def dump(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "kind": self.kind.value, "query": self.query,
                               "actor_id": self.actor_id}  # fmt: skip
        if self.namespace:
            out["namespace"] = self.namespace
        if self.must_retrieve:
            out["must_retrieve"] = [t.dump() for t in self.must_retrieve]
        if self.forbidden:
            out["forbidden"] = [t.dump() for t in self.forbidden]
        out.update(impact=self.impact.value, min_result=self.min_result, k=self.k)
        if self.threshold is not None:
            out["threshold"] = self.threshold
        return out




def parse_cases(items: Iterable[Any], source: str = "<cases>") -> list[EvalCase]:
    cases: list[EvalCase] = []
    seen: set[str] = set()
    for n, item in enumerate(items, start=1):
        cid = item.get("id") if isinstance(item, dict) else None
        try:
            case = EvalCase.model_validate(item)
        except ValidationError as exc:
            err = exc.errors(include_url=False)[0]
            loc = ".".join(str(p) for p in err["loc"]) or "<case>"
            raise EvalSetError(f"{source}: case {cid or n}: {loc}: {err['msg']}") from None
        if case.id in seen:
            raise EvalSetError(f"{source}: case id {case.id!r} appears twice")
        seen.add(case.id)
        cases.append(case)
    return cases


def read_source(location: str | Path) -> tuple[str, str]:
    """(text, name) from a path, ``file://path`` or ``s3://bucket/key?endpoint_url=..&region=..``."""
    loc = str(location)
    if loc.startswith("s3://"):
        from urllib.parse import parse_qs, urlparse

        from botocore.exceptions import BotoCoreError, ClientError

        from memlife.audit import S3Sink

        u = urlparse(loc)
        q = {k: v[-1] for k, v in parse_qs(u.query).items()}
        key = u.path.lstrip("/")
        name = f"s3://{u.netloc}/{key}"
        endpoint = q.get("endpoint_url") or os.environ.get("MEMLIFE_S3_ENDPOINT_URL")
        try:
            body = S3Sink(u.netloc, endpoint_url=endpoint, region=q.get("region")).get(key)
        except (BotoCoreError, ClientError) as exc:
            raise EvalSetError(f"{name}: {type(exc).__name__}") from None
        if body is None:
            raise EvalSetError(f"{name}: no such object")
        return body.decode("utf-8"), name
    p = Path(loc.removeprefix("file://"))
    try:
        return p.read_text(encoding="utf-8"), str(p)
    except OSError as exc:
        raise EvalSetError(f"{p}: {exc.strerror or exc}") from None


def load_cases(path: str | Path) -> list[EvalCase]:
    """YAML (a list, or a mapping with ``cases:``) or JSONL (one case per line), from a
    file or ``s3://bucket/key``."""
    text, name = read_source(path)
    suffix = Path(name.split("?")[0]).suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        items = []
        for n, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    items.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise EvalSetError(f"{name}: line {n}: malformed JSON: {exc.msg}") from None
        return _some(parse_cases(items, name), name)
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise EvalSetError(f"{name}: not valid YAML: {exc}") from None
    if isinstance(data, dict):
        data = data.get("cases")
    if not isinstance(data, list):
        raise EvalSetError(f"{name}: expected a list of cases (or a mapping with 'cases:')")
    return _some(parse_cases(data, name), name)


def _some(cases: list[EvalCase], name: str) -> list[EvalCase]:
    """An empty set would satisfy a required gate while checking nothing."""
    if not cases:
        raise EvalSetError(f"{name}: no cases (write some with `memlife eval init`)")
    return cases


def dump_cases(cases: Sequence[EvalCase], path: str | Path) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.suffix.lower() in (".jsonl", ".ndjson"):
        p.write_text("".join(json.dumps(c.dump()) + "\n" for c in cases), encoding="utf-8")
    else:
        header = ("# memlife evaluation set (docs/evaluation.md). Derived from the store by\n"
                  "# `memlife eval init`; review it: these queries and facts are yours to edit.\n")  # fmt: skip
        body = yaml.safe_dump(
            {"cases": [c.dump() for c in cases]}, sort_keys=False, allow_unicode=True
        )
        p.write_text(header + body, encoding="utf-8")
    return p


# -- a starter set derived from the store ----------------------------------------------------
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
    out: dict[str, EvalCase] = {}
    for key in sink.list("operations/"):
        doc = json.loads(sink.get(key) or b"{}")
        if doc.get("action") != "erase" or doc.get("outcome") in (None, "failed"):
            continue
        scope = doc.get("scope") or {}
        actor, ns, rid = scope.get("actor_id"), scope.get("namespace"), doc.get("record_id")
        if not (actor and ns and rid) or (actors is not None and actor not in actors):
            continue
        leaf = ns.rstrip("/").rsplit("/", 1)[-1].replace("_", " ") or "memories"
        out.setdefault(rid, EvalCase(
            id=f"erased-{actor}-{rid}", kind=CaseKind.erased, actor_id=actor, namespace=ns,
            query=f"What do we know about the user's {leaf}?", forbidden=[Target(id=rid)],
            k=100, threshold=-1.0,
        ))  # fmt: skip
    return [out[k] for k in sorted(out)]


def starter_cases(
    store: Any, *, policy: Any = None, now: datetime | None = None, actors: int = 5,
    actor_ids: Sequence[str] = (), per_kind: int = 2, sink: Any = None, validate: bool = True,
) -> list[EvalCase]:  # fmt: skip
    """Cases for the first ``actors`` actors (or ``actor_ids``), from what the planner sees.

    recent_preference: the newest statement of a changed preference (or the newest
    preference) must be retrieved; superseded_fact: the older statements it supersedes
    (and ones already superseded) must not be; expired_fact: a hard-expired record must
    not be shown; procedure: an active procedural instruction must be retrieved (high
    impact); erased: an erased record (from the erasure receipts in ``sink``) must never
    come back. Queries are questions from templates per memory type and subject, never
    the stored text. With ``validate``, a must-retrieve case that fails on the store as it
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
    if validate:
        from memlife.gate import ShadowRecall

        recall = ShadowRecall(store)

    def add(case: EvalCase) -> None:
        if (case.actor_id, case.kind) in counts and counts[(case.actor_id, case.kind)] >= per_kind:
            return
        if recall is not None and case.must_retrieve:
            from memlife.gate import run_case

            if not run_case(case, recall)["passed"]:
                return  # the question does not find it today: not a baseline worth keeping
        counts[(case.actor_id, case.kind)] = counts.get((case.actor_id, case.kind), 0) + 1
        cases.append(case)

    for actor in chosen:
        for ns in store.list_namespaces(actor):
            records = {r.id: r for p in iter_shard(store, actor, ns) for r in p.records}
            active = {i: r for i, r in records.items() if r.status is Status.active}
            decisions = planner.plan_shard([[_view(r) for r in active.values()]])
            # Changed preferences: survivor must be retrieved, its superseded statements not.
            survivors: dict[str, list[str]] = {}
            for d in decisions:
                if d.action is Action.supersede_candidate and d.survivor:
                    survivors.setdefault(d.survivor, []).append(d.id)
            for sid, olds in sorted(survivors.items()):
                head = active.get(sid)
                if head is None or head.memory_type is not MemoryType.semantic:
                    continue
                slug = (head.subject or "fact").replace(" ", "_")
                stale = [o for o in sorted(olds)
                         if normalise(active[o].content) != normalise(head.content)]  # fmt: skip
                add(EvalCase(id=f"pref-{actor}-{slug}-{sid}", kind=CaseKind.recent_preference,
                             query=question_for(head), actor_id=actor, namespace=ns,
                             must_retrieve=[Target(id=sid)]))  # fmt: skip
                if stale:
                    add(EvalCase(id=f"stale-{actor}-{slug}-{sid}", kind=CaseKind.superseded_fact,
                                 query=question_for(head), actor_id=actor, namespace=ns,
                                 forbidden=[Target(id=o) for o in stale[:3]]))  # fmt: skip
            # Statements already superseded by an earlier run must stay out of recall.
            for r in sorted(records.values(), key=lambda r: r.id):
                if r.status is Status.superseded:
                    add(EvalCase(id=f"stale-{actor}-{r.id}", kind=CaseKind.superseded_fact,
                                 query=question_for(r), actor_id=actor, namespace=ns,
                                 forbidden=[Target(id=r.id)]))  # fmt: skip
            prefs = sorted((r for r in active.values() if r.memory_type is MemoryType.semantic
                            and "preference" in ns), key=lambda r: (r.created_at, r.id))  # fmt: skip
            for r in reversed(prefs[-per_kind:]):  # the newest preferences
                add(EvalCase(id=f"pref-{actor}-{r.id}", kind=CaseKind.recent_preference,
                             query=question_for(r), actor_id=actor, namespace=ns,
                             must_retrieve=[Target(id=r.id)]))  # fmt: skip
            for d in decisions:
                r = active[d.id]
                if d.action is Action.delete_expired:
                    add(EvalCase(id=f"expired-{actor}-{d.id}", kind=CaseKind.expired_fact,
                                 query=question_for(r), actor_id=actor, namespace=ns,
                                 forbidden=[Target(id=d.id)]))  # fmt: skip
                elif r.memory_type is MemoryType.procedural and d.action not in DELETES:
                    add(EvalCase(id=f"proc-{actor}-{d.id}", kind=CaseKind.procedure,
                                 query=question_for(r), actor_id=actor, namespace=ns,
                                 must_retrieve=[Target(id=d.id)], impact=Impact.high))  # fmt: skip
    if sink is not None:
        for c in erasure_cases(sink, list(actor_ids) or None):  # every erased actor by default
            add(c)
    return cases


DELETES = frozenset({"delete_expired", "delete_pending"})


def _view(r: Any) -> Any:
    from memlife.model import plan_view

    return plan_view(r)
