"""The consolidation memo: a group whose members, content, policy and consolidator already
have an outcome is not read or sent again (what decides "settled" for the group executor,
memlife/apply/groups.py)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from memlife.apply.tally import Tally
from memlife.consolidate.base import Group
from memlife.journal import MemoOutcome
from memlife.model import days_after
from memlife.plan import Decision

if TYPE_CHECKING:
    from memlife.apply.executor import Executor
    from memlife.apply.groups import StagedGroup

KEPT_APART = "KEPT_APART"  # the model judged the records complement/unrelated
NO_MERGE = "NO_MERGE"  # the rules found fewer than two records to merge
REFUSED = "REFUSED"  # the answer was refused (grounding, schema): retry_at, then review
# The regression gate named the group as what blocks a run's supersedes: kept under the memo
# key AND the evaluation set's digest (gate_memo_key), so a changed member, policy, model or
# evaluation set re-opens it; after GATE_BLOCK_RECHECK it is tried again anyway (the rest of
# the actor's memory, which the gate also reads, may have changed).
GATE_BLOCKED = "GATE_BLOCKED"
GATE_BLOCK_RECHECK = timedelta(days=30)


def memo_key(ex: Executor, key: str, members: Sequence[Decision]) -> str:
    """Members, their content hashes and the planner's roles, the policy (version and
    content: a threshold edited under the same version is another policy) and the
    consolidator with its prompt's version: a new member, an edited one, a new policy,
    another model or another prompt re-opens it."""
    c = ex.consolidator
    who = ex.memo_as or f"{getattr(c, 'name', type(c).__name__)}:{getattr(c, 'model', '')}"
    # a model's answers depend on its prompt: a new one asks again (audit 51c)
    if not ex.memo_as and isinstance(prompt := getattr(c, "prompt_version", None), str):
        who += f":{prompt}"
    parts = sorted(f"{d.id}:{d.content_sha256}:{d.action}:{d.survivor}" for d in members)
    raw = "\x1f".join([members[0].actor_id, members[0].namespace, key, ex.policy.version,
                       ex.policy_fingerprint, who, *parts])  # fmt: skip
    return hashlib.sha256(raw.encode()).hexdigest()


def gate_memo_key(mkey: str, eval_digest: str) -> str:
    return hashlib.sha256(f"{mkey}\x1fgate\x1f{eval_digest}".encode()).hexdigest()


def read_memo(
    ex: Executor, todo: Sequence[tuple[str, Sequence[Decision]]]
) -> dict[str, tuple[str, MemoOutcome | None, MemoOutcome | None]]:
    """Group key -> (memo key, its settled outcome, a gate block under this evaluation set);
    one batched read per shard. A dry run keeps no journal: it reads the memo
    (ex.memo_reader) and never writes it."""
    read = ex.memo_reader if ex.dry_run else ex.journal.outcomes
    if read is None or ex.consolidator is None or not todo:
        return {}
    keys = {key: memo_key(ex, key, members) for key, members in todo}
    digest = ex.eval_digest
    gate_keys = {mk: gate_memo_key(mk, digest) for mk in keys.values()} if digest else {}
    known = read([*keys.values(), *gate_keys.values()])
    return {
        key: (mk, known.get(mk), known.get(gate_keys[mk]) if mk in gate_keys else None)
        for key, mk in keys.items()
    }


def remember_gate_blocked(ex: Executor, staged: StagedGroup, tally: Tally) -> None:
    """The gate named this group as blocking: not staged again (no model call) until a
    member, the policy, the consolidator or the evaluation set changes (or the recheck)."""
    if ex.dry_run or not staged.memo_key or not ex.eval_digest:
        return
    actor_id, namespace = staged.shard
    # a cutoff in 9999's last month (--allow-future-cutoff): the calendar's last instant,
    # not an OverflowError after the night's changes (audit 50f)
    recheck = days_after(ex.cutoff, GATE_BLOCK_RECHECK / timedelta(days=1))
    ex.journal.remember_outcome(
        gate_memo_key(staged.memo_key, ex.eval_digest), actor_id, namespace, GATE_BLOCKED,
        recheck, ex.cutoff,
    )  # fmt: skip
    tally.counts["gate_blocked_groups_remembered"] += 1


def settled(ex: Executor, known: MemoOutcome, tally: Tally, key: str | None = None) -> bool:
    """True: the group's outcome stands (count it and skip the group); ``key``: the group's
    (a throttled batch's retry counts its earlier attempt's verdict instead: apply/carry.py)."""
    if known["outcome"] == REFUSED:
        if known["retry_at"] is None:
            tally.stand_in(key, "consolidation_in_review")
            return True
        if known["retry_at"] > ex.cutoff:
            tally.stand_in(key, "consolidation_backing_off")
            return True
        return False  # its backoff is over: sent again (MAX_REJECTIONS in all)
    tally.stand_in(key, "consolidation_unchanged")
    return True


def remember(ex: Executor, mkey: str | None, group: Group, outcome: str,
              retry_at: datetime | None = None) -> None:  # fmt: skip
    if mkey is not None and not ex.dry_run:
        ex.journal.remember_outcome(
            mkey, group.actor_id, group.namespace, outcome, retry_at, ex.cutoff
        )
