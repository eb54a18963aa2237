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
from memlife.derived import DerivedCache, derived_for, digest, digest_rows, policy_digest
from memlife.model import PlanView
from memlife.plan import Decision

if TYPE_CHECKING:
    from memlife.apply.executor import Executor

KIND = "staging"  # one row per shard: group digest -> its outcome
TOTAL = "staging_total"  # one row per shard: the digest of all its groups -> their sum
# counts that say what this run did, not what the group comes to: never replayed
_NOT_KEPT = frozenset({"embedded"})
Outcome = list[Any]  # [staged, read_vectors, counts, rejections, calls, tokens in, tokens out]


class StageCache:
    """The staging outcomes of one shard's groups: looked up, then the misses recorded.

    A shard whose groups are all unchanged is answered by one row holding their sum (one
    digest over the groups' digests); otherwise group by group."""

    def __init__(self, derived: DerivedCache, shard: tuple[str, str], context: str,
                 views: Mapping[str, PlanView]) -> None:  # fmt: skip
        self.derived, self.shard, self.context, self.views = derived, shard, context, views
        self._known: dict[str, Any] | None = None
        self.now: dict[str, Outcome] = {}  # this run's outcomes: the row is rewritten with them

    @property
    def known(self) -> dict[str, Any]:
        if self._known is None:
            self._known = self.derived.entries(self.shard, KIND, self.context)
        return self._known

    @classmethod
    def open(
        cls, ex: Executor, decisions: Sequence[Decision], views: Mapping[str, PlanView] | None
    ) -> StageCache | None:
        """None where outcomes may not be kept: an apply run or a gated dry run (they build
        replacements), a model consolidator, no views, no SQLite file for the cache."""
        if not ex.dry_run or ex.evaluated or views is None or not decisions:
            return None
        context = ex.__dict__.get("_stage_context")
        if context is None:
            context = ex.__dict__["_stage_context"] = _context(ex)
        if not context:
            return None
        derived = derived_for(ex.embeddings)
        if derived is None:
            return None
        return cls(derived, (decisions[0].actor_id, decisions[0].namespace), context, views)

    def key(self, group: str, members: Sequence[Decision]) -> str | None:
        """The group's digest over what staging it reads of each member (PlanView by
        position: 0 id, 3 memory_type, 4 subject, 6 source, 7 created, 10 last_verified,
        12 retention_class, 13 status, 15 content_sha256, 16 statement key, 17 polarity)
        and the planner's survivor; None when a member has no view."""
        views = self.views
        rows: list[str] = []
        times: list[float | None] = []
        for d in members:
            v = views.get(d.id)
            if v is None:
                return None
            rows.append(
                f"{len(v[0])}:{v[0]}\x1f{v[3]}\x1f{_text(v[4])}\x1f{v[6]}\x1f{v[12]}\x1f{v[13]}"
                f"\x1f{v[15]}\x1f{v[16]}\x1f{1 if v[17] else 0}"
            )
            times += (v[7], v[10])
        survivor = next((d.survivor for d in members if d.survivor), None)
        return digest_rows((self.context, f"{len(group)}:{group}", _text(survivor)), rows, times)

    def replay_shard(self, keys: Sequence[str | None], tally: Tally) -> int | None:
        """Every group unchanged: their kept sum added to ``tally``; returns how many were
        staged. None when any group changed (or was never kept)."""
        if not keys or None in keys:
            return None
        total = self.derived.get(self.shard, TOTAL, _shard_key(self.context, keys))
        if total is None:
            return None
        self.derived.stats.hits += len(keys) - 1  # get() counted one
        staged, counts, rejections, calls, tokens_in, tokens_out = total
        tally.counts.update(counts)
        tally.rejections.update(rejections)
        tally.model_calls += calls
        tally.input_tokens += tokens_in
        tally.output_tokens += tokens_out
        return int(staged)

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
        _add(found, tally)
        return bool(found[0])

    def record(self, key: str | None, t: Tally, staged: bool, read_vectors: bool) -> None:
        """Keep what staging the group added to its own tally ``t`` (counts only)."""
        if key is None or t.failures or t.ids_not_deleted or t.stopped_shards:
            return
        self.now[key] = [
            int(staged), int(read_vectors),
            {k: v for k, v in t.counts.items() if k not in _NOT_KEPT}, dict(t.rejections),
            t.model_calls, t.input_tokens, t.output_tokens,
        ]  # fmt: skip

    def save(self, keys: Sequence[str | None]) -> None:
        """The shard's rows now hold this run's outcomes (groups gone since are dropped) and,
        when every group has one, their sum in group order (what replay would add)."""
        if self.now != self.known:
            self.derived.put(self.shard, KIND, self.context, self.now)
        if not keys or None in keys or any(k not in self.now for k in keys):
            return
        sum_ = Tally()
        for k in keys:
            _add(self.now[str(k)], sum_)
        total = [sum(int(self.now[str(k)][0]) for k in keys), dict(sum_.counts),
                 dict(sum_.rejections), sum_.model_calls, sum_.input_tokens, sum_.output_tokens]  # fmt: skip
        self.derived.put(self.shard, TOTAL, _shard_key(self.context, keys), total)


def _add(found: Outcome, tally: Tally) -> None:
    _, read_vectors, counts, rejections, calls, tokens_in, tokens_out = found
    if read_vectors:  # its read would have counted the texts embedded (none: all cached)
        tally.counts["embedded"] += 0
    tally.counts.update(counts)
    tally.rejections.update(rejections)
    tally.model_calls += calls
    tally.input_tokens += tokens_in
    tally.output_tokens += tokens_out


def _shard_key(context: str, keys: Sequence[str | None]) -> str:
    return digest(TOTAL, context, *(str(k) for k in keys))


def _context(ex: Executor) -> str:
    """What every group's outcome shares: policy, embedding model, consolidator, version;
    "" when outcomes may not be kept (a model consolidator: its answer is no pure function)."""
    from memlife.consolidate.extractive import ExtractiveConsolidator

    if type(ex.consolidator) is not ExtractiveConsolidator or ex.embeddings is None:
        return ""
    model = ex.embeddings.model_id
    # the dry run's stand-in for a model (judge_additive off) keeps no group apart: its
    # stagings are not the offline rule's (audit 47r)
    name = ex.consolidator.name + ("" if ex.consolidator.judge_additive else ":stand-in")
    return digest(KIND, policy_digest(ex.policy), model, name)


def _text(value: str | None) -> str:
    return "-" if value is None else f"{len(value)}:{value}"
