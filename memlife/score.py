"""The composite score: how much a memory is still earning its place (0..1).

For a record r of memory type t at cutoff `now` (ages in days, never negative):

    creation_recency = 2 ** (-age(created_at) / half_life_t.creation)
    access_recency   = 2 ** (-age(last_accessed_at) / half_life_t.access)   (0 if never read,
                       or read later than the cutoff + FUTURE_SKEW: no read yet)
    frequency        = 1 - exp(-access_count / frequency_scale_t)              (saturates)
    verification     = 1 - min(1, age(last_verified_at) / verification_stale_days_t)
                       (0 if never verified; 1 when the type has no staleness limit)
    source           = source_weights[r.source]
    confidence       = r.confidence (0..1, from extraction/consolidation)

    score = sum(w_t[f] * f) / sum(w_t)                       # weighted mean of the above
            - contradiction_penalty * contradicted           # a newer statement disagrees
            - sensitivity_penalty[r.retention_class]         # sensitive data earns its keep
    clamped to [0, 1].

The score ranks and selects candidates; it never deletes on its own (see plan.py).
Pure and cheap: no I/O, constants folded per memory type once per policy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from memlife.model import FUTURE_SKEW, MemoryType, PlanView
from memlife.policy import Policy

_DAY = 86400.0
# A last access stamped later than the cutoff plus the clock skew is no read that happened
# by then (the ledger leaves such reads out too, actor_stats(until=)): read as age zero, a
# stamp in 9999 (an import, a host clock set ahead) kept a record fresh for ever (audit 50h)
_SKEW = FUTURE_SKEW.total_seconds()


@dataclass(frozen=True, slots=True)
class _TypeConstants:
    creation_rate: float  # ln2 / half-life, per day
    access_rate: float
    freq_scale: float
    stale_days: float | None
    w_creation: float
    w_access: float
    w_freq: float
    w_verify: float
    w_source: float
    w_conf: float
    w_total: float


@dataclass(frozen=True, slots=True)
class ScoreParts:
    creation_recency: float
    access_recency: float
    frequency: float
    verification: float
    source: float
    score: float


class Scorer:
    """Scores records under one policy; build once per run, call per record."""

    def __init__(self, policy: Policy):
        self.policy = policy
        self._types: dict[MemoryType, _TypeConstants] = {}
        for mt, tp in policy.memory_types.items():
            w = tp.weights
            self._types[mt] = _TypeConstants(
                creation_rate=math.log(2) / tp.half_life_days.creation,
                access_rate=math.log(2) / tp.half_life_days.access,
                freq_scale=tp.frequency_scale,
                stale_days=tp.verification_stale_days,
                w_creation=w.creation_recency,
                w_access=w.access_recency,
                w_freq=w.frequency,
                w_verify=w.verification,
                w_source=w.source,
                w_conf=w.confidence,
                w_total=w.creation_recency
                + w.access_recency
                + w.frequency
                + w.verification
                + w.source
                + w.confidence,
            )
        self._source = {s: float(v) for s, v in policy.source_weights.items()}
        self._sensitivity = {r: float(v) for r, v in policy.sensitivity_penalty.items()}

    def parts(self, r: PlanView, now: float, contradicted: bool = False) -> ScoreParts:
        """Score one record at cutoff ``now`` (epoch seconds)."""
        c = self._types[r.memory_type]
        age = max(0.0, (now - r.created) / _DAY)
        creation = math.exp(-c.creation_rate * age)
        if r.last_accessed is not None and r.last_accessed <= now + _SKEW:
            access = math.exp(-c.access_rate * max(0.0, (now - r.last_accessed) / _DAY))
        else:
            access = 0.0
        freq = 1.0 - math.exp(-r.access_count / c.freq_scale)
        if c.stale_days is None:
            verify = 1.0
        elif r.last_verified is None:
            verify = 0.0
        else:
            verify = 1.0 - min(1.0, max(0.0, (now - r.last_verified) / _DAY) / c.stale_days)
        source = self._source[r.source]
        raw = (
            c.w_creation * creation
            + c.w_access * access
            + c.w_freq * freq
            + c.w_verify * verify
            + c.w_source * source
            + c.w_conf * r.confidence
        ) / c.w_total
        raw -= self._sensitivity.get(r.retention_class, 0.0)
        if contradicted:
            raw -= self.policy.contradiction_penalty
        score = min(1.0, max(0.0, raw))
        return ScoreParts(creation, access, freq, verify, source, score)

    def score(self, r: PlanView, now: float, contradicted: bool = False) -> float:
        """Same formula as :meth:`parts`, without building the breakdown (hot path: once per
        record of the store, so the view's fields are read by position, in PlanView order:
        3 memory_type, 6 source, 7 created, 8 last_accessed, 9 access_count,
        10 last_verified, 12 retention_class, 18 confidence)."""
        c = self._types[r[3]]
        exp = math.exp
        total = c.w_creation * exp(-c.creation_rate * max(0.0, (now - r[7]) / _DAY))
        accessed = r[8]
        if accessed is not None and accessed <= now + _SKEW:
            total += c.w_access * exp(-c.access_rate * max(0.0, (now - accessed) / _DAY))
        total += c.w_freq * (1.0 - exp(-r[9] / c.freq_scale))
        if c.stale_days is None:
            total += c.w_verify
        elif r[10] is not None:
            since = max(0.0, (now - r[10]) / _DAY)
            total += c.w_verify * (1.0 - min(1.0, since / c.stale_days))
        raw = (total + c.w_source * self._source[r[6]] + c.w_conf * r[18]) / c.w_total
        raw -= self._sensitivity.get(r[12], 0.0)
        if contradicted:
            raw -= self.policy.contradiction_penalty
        return 1.0 if raw > 1.0 else (0.0 if raw < 0.0 else raw)
