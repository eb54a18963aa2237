"""The decision for each record: exactly one action plus reason codes. Pure: no I/O.

Precedence, highest first (a newcomer should find every rule here):
  1. legal hold           -> hold (an expired held record records DELETE_DEFERRED)
  2. hard expiry / TTL     -> delete_expired (no score computed, no model call)
  3. pending_delete past grace -> delete_pending
  4. superseded / quarantined -> retain (already handled; never regrouped)
  5. subject groups (2+ active records on one actor+namespace+subject):
       exact or normalised duplicate        -> consolidate_candidate
       older statement, newer one at least as authoritative (semantic)
                                            -> supersede_candidate (CONTRADICTION or NEWER_STATEMENT)
       newer statement from a weaker source -> review (CONFLICTING_SOURCE)
       differing procedures                 -> review (strictest gate: a human decides)
       the newest statement of a group      -> consolidate_candidate
     Inferred subjects (group.infer_subjects, no person named the subject):
       the same statement said more than once -> consolidate_candidate (merge)
       a probable update of an older statement -> review POSSIBLE_UPDATE, one pair item
           (older record, ``pair`` = the newer), never superseded on cosine alone;
           with a model configured (``model_decides``) the pair goes to the model instead
  6. missing owner (after the policy's per-namespace owners) -> review
     stale verification or a low score -> review only where acting on it matters
       (policy.review: stale types/classes, frequently recalled); elsewhere they only
       lower the score and the record is retained with the reason noted
  7. otherwise -> retain
A low score alone never deletes; procedural records are never deleted by score.
A superseded original is deleted superseded_retention_days after it was superseded.
A disputed record (review queue) is never deleted while its dispute is open.
Groups never cross an actor or a namespace: planning works one shard at a time.

Why one module (over 500 lines): one decision, the precedence above, and every rule that
implements it; split, a reader would chase a record's action across files.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from memlife.model import FUTURE_SKEW, MemoryType, PlanView, RetentionClass, Source, Status
from memlife.policy import Policy
from memlife.score import Scorer


class Action(StrEnum):
    retain = "retain"
    hold = "hold"
    delete_expired = "delete_expired"
    delete_pending = "delete_pending"
    review = "review"
    consolidate_candidate = "consolidate_candidate"
    supersede_candidate = "supersede_candidate"


class Reason(StrEnum):
    LEGAL_HOLD = "LEGAL_HOLD"
    DELETE_DEFERRED = "DELETE_DEFERRED"  # would be deleted but a hold defers it
    RETAINED_STATUS = "RETAINED_STATUS"
    HARD_EXPIRED = "HARD_EXPIRED"
    TTL_EXPIRED = "TTL_EXPIRED"  # the type's default TTL, for records without expires_at
    GRACE_ELAPSED = "GRACE_ELAPSED"
    PENDING_GRACE = "PENDING_GRACE"
    ALREADY_SUPERSEDED = "ALREADY_SUPERSEDED"
    QUARANTINED = "QUARANTINED"
    MISSING_OWNER = "MISSING_OWNER"
    STALE_VERIFICATION = "STALE_VERIFICATION"
    LOW_SCORE = "LOW_SCORE"
    SAME_SUBJECT = "SAME_SUBJECT"
    EXACT_DUPLICATE = "EXACT_DUPLICATE"
    NEAR_DUPLICATE = "NEAR_DUPLICATE"
    CONTRADICTION = "CONTRADICTION"
    NEWER_STATEMENT = "NEWER_STATEMENT"
    CONFLICTING_SOURCE = "CONFLICTING_SOURCE"
    POSSIBLE_UPDATE = "POSSIBLE_UPDATE"  # a newer record probably replaces this one: pair item
    SUBJECT_INFERRED = "SUBJECT_INFERRED"  # grouped under a subject inferred from embeddings
    SUPERSEDED_RETENTION = "SUPERSEDED_RETENTION"  # superseded longer than the policy keeps it
    DISPUTED = "DISPUTED"  # a reviewer disputed the record: never deleted until resolved
    HELD_SOURCE = "HELD_SOURCE"  # a held source names it its replacement (memlife/pinned.py)
    # superseded by a record the night deletes: it goes with it (memlife/orphans.py)
    REPLACEMENT_DELETED = "REPLACEMENT_DELETED"
    # a killed run's replacement, its group withdrawn on the rerun (apply/group_resume.py)
    CONSOLIDATION_WITHDRAWN = "CONSOLIDATION_WITHDRAWN"
    SCORE_OK = "SCORE_OK"


# Reasons that open a review item (keyed by record + reason); the rest are context.
REVIEW_REASONS = frozenset({
    Reason.MISSING_OWNER, Reason.STALE_VERIFICATION, Reason.LOW_SCORE,
    Reason.CONFLICTING_SOURCE, Reason.CONTRADICTION, Reason.POSSIBLE_UPDATE,
})  # fmt: skip


DELETE_ACTIONS = frozenset({Action.delete_expired, Action.delete_pending})


_DAY = 86400.0


@dataclass(slots=True)
class Decision:
    id: str
    actor_id: str
    namespace: str
    action: Action
    reasons: list[Reason]
    score: float | None = None
    group: str | None = None  # hash of actor+namespace+subject; no content
    survivor: str | None = None  # for supersede candidates: the newer statement's id
    content_sha256: str | None = None  # for receipts (a hash, never content)
    pair: str | None = None  # POSSIBLE_UPDATE: the newer record that probably replaces this one
    priority: float | None = None  # review items: impact (type, class, confidence, access)
    owner: str | None = None  # the record's owner, or the policy's for its namespace
    memory_type: str | None = None

    def report_row(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "actor_id": self.actor_id,
            "namespace": self.namespace,
            "action": str(self.action),
            "reasons": [str(r) for r in self.reasons],
            "score": None if self.score is None else round(self.score, 6),
        }


def _inferred_view(r: PlanView, subject: str, statement: str) -> PlanView:
    """``r._replace(subject=subject, norm_sha256=statement, subject_inferred=True)``, built
    directly (_replace costs several times more, once per inferred record)."""
    return tuple.__new__(PlanView, (*r[:4], subject, *r[5:16], statement, r[17], r[18], True))


def group_key(actor_id: str, namespace: str, subject: str, memory_type: str = "semantic") -> str:
    """One group per actor + namespace + subject + memory type (a fact never merges a procedure)."""
    raw = f"{actor_id}\x1f{namespace}\x1f{subject.strip().lower()}\x1f{memory_type}".encode()
    return hashlib.sha256(raw).hexdigest()[:24]


@dataclass
class _GroupOutcome:
    action: Action
    reasons: list[Reason]
    contradicted: bool = False
    survivor: str | None = None


@dataclass(frozen=True)
class ShardHints:
    """What embedding-based grouping (group.infer_subjects) and the review queue tell the
    planner about one shard: ids and keys only, no content."""

    subjects: dict[str, str] = field(default_factory=dict)  # id -> inferred subject key
    statements: dict[str, str] = field(default_factory=dict)  # id -> statement key (near dups)
    updates: dict[str, str] = field(default_factory=dict)  # older id -> newer id
    disputed: frozenset[str] = frozenset()
    # older ids of updates a reviewer answered (keep, verify, dispute) for this pair and the
    # text they hold: the model is not asked to overrule the person (review_queue decides)
    answered: frozenset[str] = frozenset()


@dataclass
class Planner:
    policy: Policy
    now: datetime
    model_decides: bool = False  # a model consolidator judges possible updates
    scorer: Scorer = field(init=False)

    def __post_init__(self) -> None:
        self.scorer = Scorer(self.policy)
        self._now = self.now.timestamp()
        self._grace = self.policy.pending_delete_grace_days * _DAY
        self._ttl = {
            mt: (tp.default_ttl_days * _DAY if tp.default_ttl_days else None)
            for mt, tp in self.policy.memory_types.items()
        }
        self._low = {mt: tp.low_score for mt, tp in self.policy.memory_types.items()}
        self._kept_superseded = {
            rc: days * _DAY for rc, days in self.policy.superseded_retention_days.items()
            if rc != RetentionClass.legal_hold
        }  # fmt: skip
        rv = self.policy.review
        self._stale_matters_types = frozenset(rv.stale_types)
        self._stale_matters_classes = frozenset(rv.stale_classes)
        # verified before this instant = stale (None: the type has no staleness limit)
        self._stale_before = {
            mt: (
                self._now - tp.verification_stale_days * _DAY
                if tp.verification_stale_days
                else None
            )
            for mt, tp in self.policy.memory_types.items()
        }

    # -- one record, no context ------------------------------------------------------------
    def expired(self, r: PlanView) -> Reason | None:
        if r.expires is not None:
            return Reason.HARD_EXPIRED if r.expires <= self._now else None
        ttl = self._ttl[r.memory_type]
        if ttl is not None and r.created + ttl <= self._now:
            return Reason.TTL_EXPIRED
        return None

    def _early(self, r: PlanView) -> Decision | None:
        """Decisions that need no score and no group (steps 1-4)."""
        if r.status == "active" and r.retention_class != "legal_hold":
            # the common case (active, not held, not expired) decided without building anything
            if r.expires is None:
                ttl = self._ttl[r.memory_type]
                if ttl is None or r.created + ttl > self._now:
                    return None
            elif r.expires > self._now:
                return None

        def d(action: Action, *reasons: Reason) -> Decision:
            return Decision(
                r.id,
                r.actor_id,
                r.namespace,
                action,
                list(reasons),
                content_sha256=r.content_sha256,
            )

        expiry = self.expired(r)
        if r.retention_class == RetentionClass.legal_hold:
            if expiry:
                return d(Action.hold, Reason.LEGAL_HOLD, expiry, Reason.DELETE_DEFERRED)
            return d(Action.hold, Reason.LEGAL_HOLD)
        if r.status == Status.retained:  # a hold too: its deferral is recorded as one
            if expiry:
                return d(Action.hold, Reason.RETAINED_STATUS, expiry, Reason.DELETE_DEFERRED)
            return d(Action.hold, Reason.RETAINED_STATUS)
        if expiry:
            return d(Action.delete_expired, expiry)
        if r.status == Status.pending_delete:
            changed = r.status_changed or r.created
            if changed + self._grace <= self._now:
                return d(Action.delete_pending, Reason.GRACE_ELAPSED)
            return d(Action.retain, Reason.PENDING_GRACE)
        if r.status == Status.superseded:
            kept = self._kept_superseded.get(r.retention_class)
            changed = r.status_changed or r.created
            if kept is not None and changed + kept <= self._now:
                return d(
                    Action.delete_expired, Reason.ALREADY_SUPERSEDED, Reason.SUPERSEDED_RETENTION
                )
            return d(Action.retain, Reason.ALREADY_SUPERSEDED)
        if r.status == Status.quarantined:
            return d(Action.retain, Reason.QUARANTINED)
        return None

    # -- one subject group ---------------------------------------------------------------
    def _group(self, members: list[PlanView]) -> dict[str, _GroupOutcome]:
        w = self.policy.source_weights
        # a statement dated after the cutoff (+ skew) ranks below every genuine one: never wins
        future = self._now + FUTURE_SKEW.total_seconds()

        def rank(r: PlanView) -> tuple[bool, float, float, str]:
            return (r.created <= future, r.created, w[r.source], r.id)

        # Clusters of the same statement (identical once normalised), oldest cluster first.
        clusters: dict[str, list[PlanView]] = defaultdict(list)
        for r in sorted(members, key=rank):
            clusters[r.norm_sha256].append(r)
        ordered = sorted(clusters.values(), key=lambda c: rank(c[-1]))
        head_cluster, head = ordered[-1], ordered[-1][-1]
        out: dict[str, _GroupOutcome] = {}

        def mark(
            c: list[PlanView],
            action: Action,
            why: list[Reason],
            contradicted: bool = False,
            survivor: str | None = None,
        ) -> None:
            dup = []
            if len(c) > 1:
                exact = len({r.content_sha256 for r in c}) == 1
                dup = [Reason.EXACT_DUPLICATE if exact else Reason.NEAR_DUPLICATE]
            reasons = [Reason.SAME_SUBJECT, *why, *dup]
            for r in c:
                out[r.id] = _GroupOutcome(action, list(reasons), contradicted, survivor)

        if len(ordered) == 1:  # one statement, said more than once
            mark(head_cluster, Action.consolidate_candidate, [])
            return out
        if head.memory_type == MemoryType.episodic:
            # distinct events are not contradictions; only repeated ones consolidate
            for c in ordered:
                if len(c) > 1:
                    mark(c, Action.consolidate_candidate, [])
            return out
        if head.memory_type == MemoryType.procedural:
            # differing procedures: strictest gate, a reviewer decides
            for c in ordered:
                mark(c, Action.review, [Reason.CONTRADICTION], contradicted=c is not head_cluster)
            return out
        strong_head = head.source != Source.agent_inferred
        superseded_any = False
        for c in ordered[:-1]:
            strongest = max(w[r.source] for r in c)
            # a statement of the same instant and the same authority as the head leaves the
            # two without an order: only the record id would pick the "newer" (session 30)
            tied = any(r.created == head.created and w[r.source] == w[head.source] for r in c)
            if strong_head and not tied and w[head.source] >= strongest:
                why = (
                    Reason.CONTRADICTION
                    if c[-1].negated != head.negated
                    else Reason.NEWER_STATEMENT
                )
                mark(c, Action.supersede_candidate, [why], contradicted=True, survivor=head.id)
                superseded_any = True
            else:
                mark(c, Action.review, [Reason.CONFLICTING_SOURCE])
        if superseded_any:
            mark(head_cluster, Action.consolidate_candidate, [])
        else:
            mark(head_cluster, Action.review, [Reason.CONFLICTING_SOURCE])
        return out

    # -- inferred subjects: merges only, updates are pair items -------------------------------
    def _inferred(
        self, members: list[PlanView], hints: ShardHints, key: str
    ) -> tuple[dict[str, _GroupOutcome], dict[str, str]]:
        """Outcomes for one inferred subject: no person named it, so cosine alone never
        supersedes. Each statement said more than once is merged (its own group); a
        probable update becomes a POSSIBLE_UPDATE pair (model: the pair is one group)."""
        out: dict[str, _GroupOutcome] = {}
        groups: dict[str, str] = {}
        by_stmt: dict[str, list[PlanView]] = defaultdict(list)
        for r in members:
            by_stmt[r.norm_sha256].append(r)
        merged: set[str] = set()
        for stmt, c in by_stmt.items():
            if len(c) < 2:
                continue
            exact = len({r.content_sha256 for r in c}) == 1
            if not exact and c[0].memory_type == MemoryType.procedural:
                continue  # "step 4" vs "step 5" embed alike: procedures merge only when identical
            why = [Reason.SUBJECT_INFERRED,
                   Reason.EXACT_DUPLICATE if exact else Reason.NEAR_DUPLICATE]  # fmt: skip
            for r in c:
                out[r.id] = _GroupOutcome(Action.consolidate_candidate, list(why))
                groups[r.id] = f"{key}\x1f{stmt}"
                merged.add(r.id)
        by_id = {r.id: r for r in members}
        w = self.policy.source_weights
        for older, newer in sorted(hints.updates.items()):
            o, n = by_id.get(older), by_id.get(newer)
            if o is None or n is None or older in merged or newer in merged or older in out:
                continue  # merges first; a pair waits for the merged record next night
            if o.memory_type == MemoryType.episodic:
                continue  # distinct events are not updates of each other
            can_decide = (
                self.model_decides and w[n.source] >= w[o.source] and older not in hints.answered
            )
            if can_decide and newer not in out:
                pair = f"{key}\x1fupdate\x1f{older}\x1f{newer}"
                for r in (o, n):
                    out[r.id] = _GroupOutcome(
                        Action.consolidate_candidate, [Reason.SUBJECT_INFERRED, Reason.POSSIBLE_UPDATE],
                        contradicted=r is o, survivor=newer,
                    )  # fmt: skip
                    groups[r.id] = pair
            else:
                out[older] = _GroupOutcome(
                    Action.review, [Reason.SUBJECT_INFERRED, Reason.POSSIBLE_UPDATE], survivor=newer
                )
        return out, groups

    def _matters(self, r: PlanView) -> bool:
        """Acting on a stale or low-scoring record matters: strict types and classes, and
        records the agent keeps recalling."""
        return (
            r.memory_type in self._stale_matters_types
            or r.retention_class in self._stale_matters_classes
            or r.access_count >= self.policy.review.frequent_access_count
        )

    def low_score_finding(self, r: PlanView) -> bool:
        """Whether a live record outside any group the night changes holds a LOW_SCORE review
        finding at this cutoff: it scores under its type's ``low_score`` and acting on it
        matters. ``_decide_live`` decides the same inline (hot path); review_sweep asks this
        of an open item's record the night did not find again."""
        return self.scorer.score(r, self._now) < self._low[r.memory_type] and self._matters(r)

    def priority(self, r: PlanView) -> float:
        """Review priority from impact: memory type, sensitivity, (low) confidence, access."""
        rv = self.policy.review
        return (
            rv.type_priority.get(r.memory_type, 0.0)
            + rv.class_priority.get(r.retention_class, 0.0)
            + (1.0 - r.confidence)
            + min(1.0, r.access_count / rv.frequent_access_count)
        )

    # -- one shard (actor + namespace) -------------------------------------------------------
    def plan_shard(
        self, pages: Iterable[list[PlanView]], hints: ShardHints | None = None
    ) -> list[Decision]:
        """Every record of one actor/namespace, streamed page by page, gets one decision.

        Hot (once per record of the store): fields are read by position (PlanView order)
        and the policy's per-record lookups are hoisted out of the loops."""
        hints = hints or ShardHints()
        decisions: list[Decision] = []
        live: list[PlanView] = []
        by_subject: dict[tuple[str, str], list[PlanView]] = defaultdict(list)
        by_inferred: dict[str, list[PlanView]] = defaultdict(list)
        now, ttl = self._now, self._ttl
        inferred, statements = hints.subjects, hints.statements
        for page in pages:
            for r in page:
                # Inline fast path (most records): active, not held, not expired -> live.
                # r[3] memory_type, r[4] subject, r[7] created, r[11] expires
                fast = r[13] == "active" and r[12] != "legal_hold"
                if fast:
                    expires = r[11]
                    if expires is None:
                        t = ttl[r[3]]
                        fast = t is None or r[7] + t > now
                    else:
                        fast = expires > now
                if not fast:
                    early = self._early(r)
                    if early is not None:
                        if early.action in DELETE_ACTIONS and r.id in hints.disputed:
                            early.action = Action.retain
                            early.reasons.append(Reason.DISPUTED)
                        decisions.append(early)
                        continue
                subject = r[4]
                if subject:
                    live.append(r)
                    # one group per subject AND memory type: a fact never supersedes a procedure.
                    # Kept apart, not joined with \x1f and split again: a subject holding
                    # U+001F ("tea\x1fmorning") shared "tea"'s group key (audit 49e)
                    by_subject[(subject.strip().lower(), r[3])].append(r)
                elif inferred and r[0] in inferred:
                    # a person's subject always wins; this one is inferred and marked so
                    subject = inferred[r[0]]
                    r = _inferred_view(r, subject, statements.get(r[0], r[16]))
                    live.append(r)
                    by_inferred[f"{subject}\x1f{r[3]}"].append(r)
                else:
                    live.append(r)
        outcomes: dict[str, _GroupOutcome] = {}
        groups: dict[str, str] = {}
        for (subject_key, _), members in by_subject.items():
            if len(members) < 2:
                continue
            head = members[0]
            key = group_key(head.actor_id, head.namespace, subject_key, head.memory_type)
            # distinct events each merge only their own repeats: one group per statement.
            # In one group the merge's cosine joined them ("gym on Monday" / "on Tuesday",
            # 0.95) and the replacement told one event for both (audit 49x5)
            episodic = head.memory_type == MemoryType.episodic
            event = {r.id: r.norm_sha256 for r in members} if episodic else {}
            for rid, outcome in self._group(members).items():
                outcomes[rid] = outcome
                groups[rid] = (
                    group_key(head.actor_id, head.namespace, f"{subject_key}\x1f{event[rid]}",
                              head.memory_type) if rid in event else key
                )  # fmt: skip
        for bucket, members in by_inferred.items():
            if len(members) < 2:
                continue
            head = members[0]
            found, keys = self._inferred(members, hints, bucket)
            outcomes.update(found)
            for rid, raw in keys.items():
                groups[rid] = group_key(head.actor_id, head.namespace, raw, head.memory_type)
        self._decide_live(live, outcomes, groups, decisions)
        return decisions

    def _decide_live(
        self,
        live: list[PlanView],
        outcomes: dict[str, _GroupOutcome],
        groups: dict[str, str],
        decisions: list[Decision],
    ) -> None:
        """Score, review reasons and the decision of each live record (after its group's)."""
        now, stale_before, low = self._now, self._stale_before, self._low
        score_of = self.scorer.score
        owner_for = self.policy.owner_for
        owners: dict[tuple[str, str, str], str | None] = {}  # the policy's owner: once per type
        types, classes = self._stale_matters_types, self._stale_matters_classes
        frequent = self.policy.review.frequent_access_count
        retain, review_action, consolidate = (
            Action.retain,
            Action.review,
            Action.consolidate_candidate,
        )
        changing = (consolidate, Action.supersede_candidate)
        stale_reason, low_reason, score_ok = (
            Reason.STALE_VERIFICATION, Reason.LOW_SCORE, Reason.SCORE_OK
        )  # fmt: skip
        get = outcomes.get
        # Decision's fields by position: id, actor_id, namespace, action, reasons, score,
        # group, survivor, content_sha256, pair, priority, owner, memory_type
        for r in live:
            # PlanView by position: 0 id, 1 actor, 2 namespace, 3 memory_type, 5 owner,
            # 9 access_count, 10 last_verified, 12 retention_class, 15 content_sha256
            rid, mt = r[0], r[3]
            g = get(rid) if outcomes else None
            score = score_of(r, now, g is not None and g.contradicted)
            review: list[Reason] = []
            noted: list[Reason] = []  # lowers the score only: not a review item here
            owner = r[5]
            if not (owner and owner.strip()):
                scope = (r[1], r[2], mt)
                if scope not in owners:
                    owners[scope] = owner_for(r[1], r[2], mt)
                owner = owners[scope]
            if not owner:
                review.append(Reason.MISSING_OWNER)
            # acting on a stale or low-scoring record matters: strict types and classes,
            # records the agent keeps recalling, records a group changes (_matters)
            matters = (
                mt in types or r[12] in classes or r[9] >= frequent
                or (g is not None and g.action in changing)
            )  # fmt: skip
            limit = stale_before[mt]
            if limit is not None and (r[10] is None or r[10] < limit):
                (review if matters else noted).append(stale_reason)
            if score < low[mt]:
                (review if matters else noted).append(low_reason)
            smt = str(mt)
            if g is not None:
                # noted reasons stay off review decisions: each review reason opens an item
                extra = review if g.action is review_action else review + noted
                d = Decision(
                    rid, r[1], r[2], g.action, g.reasons + extra, score,
                    groups.get(rid), g.survivor, r[15], None, None, owner, smt,
                )  # fmt: skip
                if g.action is review_action and Reason.POSSIBLE_UPDATE in g.reasons:
                    d.pair = g.survivor
                    d.survivor = None
            elif review:
                d = Decision(rid, r[1], r[2], review_action, review, score,
                             None, None, r[15], None, None, owner, smt)  # fmt: skip
            else:
                d = Decision(rid, r[1], r[2], retain, noted or [score_ok], score,
                             None, None, r[15], None, None, owner, smt)  # fmt: skip
            if d.action is review_action:
                d.priority = round(self.priority(r), 6)
            decisions.append(d)
