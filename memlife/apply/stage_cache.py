"""What staging a group comes to in a dry run without a gate, kept by a digest of its inputs.

Such a dry run stages a group only to count it (consolidations proposed, duplicates merged,
contradictions resolved, the token estimate): nothing is built and nothing is kept. Those
counts are a pure function of the group's members as the store holds them (ids, content
sha256, statement key, polarity, times, source, type, subject, status, class), the
planner's survivor, the policy, the embedding model and the consolidator, as long as the
consolidator is the extractive one (a model's answer is no pure function: never kept).
Nothing in it reads the clock. The counts are kept per group in memlife/derived.py (one
row per shard); an unchanged group is then counted without reading a record or a vector.
Records' access counts and times are left out of the digest: this path never reads them
(the ledger changes them every night).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from memlife.apply.tally import Tally
from memlife.derived import DerivedCache, derived_for, digest, policy_digest
from memlife.model import PlanView
from memlife.plan import Decision

if TYPE_CHECKING:
    from memlife.apply.executor import Executor

KIND = "staging"
# counts that say what this run did, not what the group comes to: never replayed
_NOT_KEPT = frozenset({"embedded"})


class StageCache:
    """The staging outcomes of one shard's groups: looked up, then the misses recorded."""

    def __init__(self, derived: DerivedCache, shard: tuple[str, str], context: str,
                 views: Mapping[str, PlanView]) -> None:  # fmt: skip
        self.derived, self.shard, self.context, self.views = derived, shard, context, views
        self.known: dict[str, Any] = derived.entries(shard, KIND, context)
        self.now: dict[str, Any] = {}  # this run's outcomes: the row is rewritten with them

    @classmethod
    def open(
        cls, ex: Executor, decisions: Sequence[Decision], views: Mapping[str, PlanView] | None
    ) -> StageCache | None:
        """None where outcomes may not be kept: an apply run or a gated dry run (they build
        replacements), a model consolidator, no views, no SQLite file for the cache."""
        from memlife.consolidate.extractive import ExtractiveConsolidator

        if not ex.dry_run or ex.evaluated or views is None or not decisions:
            return None
        if type(ex.consolidator) is not ExtractiveConsolidator:
            return None
        derived = derived_for(ex.embeddings) if ex.embeddings is not None else None
        if derived is None:
            return None
        model = ex.embeddings.embedder.model_id if ex.embeddings is not None else "-"
        context = digest(KIND, policy_digest(ex.policy), model, ex.consolidator.name)
        return cls(derived, (decisions[0].actor_id, decisions[0].namespace), context, views)

    def key(self, group: str, members: Sequence[Decision]) -> str | None:
        """The group's digest; None when a member has no view (not planned from this page)."""
        views = self.views
        rows = []
        for d in members:
            v = views.get(d.id)
            if v is None:
                return None
            rows.append(
                f"{len(v.id)}:{v.id}\x1f{v.memory_type}\x1f{_text(v.subject)}\x1f{_text(v.owner)}"
                f"\x1f{v.source}\x1f{v.created!r}\x1f{v.last_verified!r}\x1f{v.expires!r}"
                f"\x1f{v.retention_class}\x1f{v.status}\x1f{v.status_changed!r}"
                f"\x1f{v.content_sha256}\x1f{v.norm_sha256}\x1f{int(bool(v.negated))}"
                f"\x1f{v.confidence!r}"
            )
        survivor = next((d.survivor for d in members if d.survivor), None)
        return digest(self.context, f"{len(group)}:{group}", _text(survivor), "\x1e".join(rows))

    def replay(self, key: str | None, tally: Tally) -> bool | None:
        """The kept outcome added to ``tally``: True if the group was staged, False if not,
        None on a miss."""
        if key is None:
            return None
        found = self.known.get(key)
        if found is None:
            self.derived.stats.misses += 1
            return None
        self.derived.stats.hits += 1
        self.now[key] = found
        staged, read_vectors, counts, rejections, calls, tokens_in, tokens_out = found
        if read_vectors:  # its read would have counted the texts embedded (none: all cached)
            tally.counts["embedded"] += 0
        tally.counts.update(counts)
        tally.rejections.update(rejections)
        tally.model_calls += calls
        tally.input_tokens += tokens_in
        tally.output_tokens += tokens_out
        return bool(staged)

    def record(self, key: str | None, t: Tally, staged: bool, read_vectors: bool) -> None:
        """Keep what staging the group added to its own tally ``t`` (counts only)."""
        if key is None or t.failures or t.ids_not_deleted or t.stopped_shards:
            return
        self.now[key] = [
            int(staged), int(read_vectors),
            {k: v for k, v in t.counts.items() if k not in _NOT_KEPT}, dict(t.rejections),
            t.model_calls, t.input_tokens, t.output_tokens,
        ]  # fmt: skip

    def save(self) -> None:
        """The shard's row now holds this run's outcomes (groups gone since are dropped)."""
        if self.now != self.known:
            self.derived.put(self.shard, KIND, self.context, self.now)


def _text(value: str | None) -> str:
    return "-" if value is None else f"{len(value)}:{value}"
