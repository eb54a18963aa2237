"""Phase A, the group executor: consolidate each group of a shard, then supersede its members.

It carries out each group's decision (survivor, roles, what the model sees: made in
memlife/group_plan.py) and decides nothing itself. Before a group is read: consolidation
off, withheld (an apply run without an evaluation set, enforced namespace) or settled
(the memo: its members, hashes, policy and consolidator already have an outcome) -> skip.

Staged (DESIGN step 7): ``stage_shard`` computes each group's replacement and operations
without writing anything (the replacement is held in the run, invisible to recall); the
pipeline evaluates the regression gate on them and only then ``commit_group``s the ones it
allows. Order inside a group (invariant 3): the replacement is written and receipted
before any original is superseded. The write and its supersedes are journaled in one
transaction at commit, so a crash anywhere resumes the group as a unit (apply/group_resume.py);
a crash before commit leaves nothing behind, and a rerun stages the same replacement ids.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from memlife.apply.answers import consolidate
from memlife.apply.group_reads import GroupReads, Reads
from memlife.apply.group_resume import resume_group
from memlife.apply.memo import KEPT_APART, NO_MERGE, REFUSED, read_memo, remember, settled
from memlife.apply.rejections import backing_off, reject
from memlife.apply.stage_cache import StageCache
from memlife.apply.tally import Tally
from memlife.consolidate.base import MODEL_MISCONFIGURED, ConsolidationError, Group
from memlife.consolidate.extractive import ExtractiveConsolidator
from memlife.consolidate.grounding import KEEP_APART
from memlife.consolidate.replacement import build_from_members
from memlife.errors import Reason
from memlife.faults import checkpoint
from memlife.group_plan import CONTRADICTION, plan_group
from memlife.journal import Operation, OpKind
from memlife.model import MemoryRecord, MemoryType, PlanView, Provenance, content_sha256
from memlife.plan import Action, Decision
from memlife.tombstones import ERASED_CONTENT, refusal

if TYPE_CHECKING:
    from memlife.apply.executor import Executor

# how a dry run's memo names an apply run that consolidates extractively (no model to call)
EXTRACTIVE = f"{ExtractiveConsolidator.name}:"


@dataclass
class StagedGroup:
    """A consolidation computed but not carried out: the replacement (not in the store yet)
    and the operations that commit it. Content lives only in ``replacement``/``write.payload``."""

    replacement: MemoryRecord
    write: Operation
    supersedes: list[Operation] = field(default_factory=list)
    memo_key: str | None = None  # the consolidation memo's key: a gate block is kept under it

    @property
    def shard(self) -> tuple[str, str]:
        return (self.replacement.actor_id, self.replacement.namespace)

    @property
    def superseded_ids(self) -> list[str]:
        return [o.record_id for o in self.supersedes]


class StagedRef(NamedTuple):
    """Where a staged group is, without its content: a dry run without a gate needs no more."""

    shard: tuple[str, str]


def consolidate_shard(ex: Executor, decisions: Sequence[Decision], tally: Tally) -> None:
    """Stage and commit at once (no gate): callers that evaluate first use stage_shard."""
    for staged in stage_shard(ex, decisions, tally):
        commit_group(ex, staged, tally)


def stage_shard(
    ex: Executor,
    decisions: Sequence[Decision],
    tally: Tally,
    read: Mapping[str, MemoryRecord] | None = None,
    views: Mapping[str, PlanView] | None = None,
) -> list[StagedGroup | StagedRef]:
    """Each group of the shard staged (or, in a dry run without a gate, counted: from the
    derived cache when the group is unchanged, apply/stage_cache.py). ``views``: the
    shard's planning views by id (what the cache's digest is made of)."""
    out: list[StagedGroup | StagedRef] = []
    groups: dict[str, list[Decision]] = {}
    for d in decisions:
        if d.action in (Action.supersede_candidate, Action.consolidate_candidate) and d.group:
            groups.setdefault(d.group, []).append(d)
    todo = [(key, members) for key, members in sorted(groups.items()) if len(members) >= 2]
    memo = read_memo(ex, todo)
    runnable: list[tuple[str, list[Decision], str | None]] = []
    for n, (key, members) in enumerate(todo):
        if (members[0].actor_id, members[0].namespace) in ex.stopped:
            # the shard stopped (StoreError): the rest waits for the next run, untouched, so
            # its records are retained (audit 51vii: they were in no outcome)
            tally.counts["shard_stopped_records"] += sum(len(m) for _, m in todo[n:])
            break
        if ex.consolidator is None:  # consolidation off: nothing to read or analyse
            tally.counts["consolidation_skipped"] += 1
            tally.counts["unmerged_kept_records"] += len(members)  # they stay: retained
            continue
        if withheld_by_gate(ex, members[0].namespace):
            tally.counts["gate_withheld_groups"] += 1  # decided before any read or model call
            tally.counts["gate_kept_records"] += len(members)  # they stay as they are: retained
            continue
        mkey, known, blocked = memo.get(key, (None, None, None))
        if known is not None and settled(ex, known, tally, key):
            tally.counts["unmerged_kept_records"] += len(members)
            continue
        if (
            blocked is not None
            and blocked["retry_at"] is not None
            and blocked["retry_at"] > ex.cutoff
        ):
            tally.counts["consolidation_gate_blocked_unchanged"] += 1  # no read, no model call
            tally.counts["unmerged_kept_records"] += len(members)
            continue
        runnable.append((key, members, mkey))
    # (staging adds nothing to ex.stopped: only a commit does, after the whole shard is staged)
    cache = StageCache.open(ex, decisions, views)
    keys: list[str | None] = []
    all_keys: list[str | None] = []
    if cache is not None:  # a dry run without a gate: unchanged groups are counted as before
        all_keys = [cache.key(key, members) for key, members, _ in runnable]
        staged_n = cache.replay_shard(all_keys, tally)
        if staged_n is not None:  # every group unchanged: their sum
            return out + [StagedRef(cache.shard)] * staged_n
        misses = []
        for (key, members, mkey), ckey in zip(runnable, all_keys, strict=True):
            hit = cache.replay(ckey, tally)
            if hit is None:
                misses.append((key, members, mkey))
                keys.append(ckey)
            elif hit:
                out.append(StagedRef((members[0].actor_id, members[0].namespace)))
        runnable = misses
    reads = GroupReads(ex, [[d.id for d in members] for _, members, _ in runnable], tally, read)
    for i, (key, members, mkey) in enumerate(runnable):
        r = reads.group(i)
        t = Tally() if cache is not None else tally
        staged = stage_group(ex, key, members, t, memo_key=mkey, reads=r)
        if staged is None:  # kept apart, refused, backing off: the records stay as they are
            t.counts["unmerged_kept_records"] += len(members)
        if cache is not None:
            read_vectors = ex.embeddings is not None and len(r.members()) >= 2
            cache.record(keys[i], t, staged is not None, read_vectors)
            tally.merge(t)
        if staged is not None:
            out.append(staged)
    if cache is not None:
        cache.save(all_keys)
    return out


def withheld_by_gate(ex: Executor, namespace: str) -> bool:
    """An apply run without an evaluation set withholds every consolidation where deletion
    is enforced (pipeline.ungated, policy gate.required): known before anything is read,
    so such a group costs no read, no embedding and no model call, night after night."""
    return (
        not ex.dry_run
        and not ex.evaluated
        and ex.policy.gate.required
        and ex.policy.deletion_enforced(namespace)
    )


def consolidate_group(ex: Executor, key: str, members: list[Decision], tally: Tally) -> None:
    staged = stage_group(ex, key, members, tally)
    if staged is not None:
        commit_group(ex, staged, tally)


def stage_group(
    ex: Executor,
    key: str,
    members: list[Decision],
    tally: Tally,
    memo_key: str | None = None,
    reads: Reads | None = None,
) -> StagedGroup | StagedRef | None:
    """Carry out the group's plan (group_plan.plan_group) up to the point of writing."""
    reads = reads or Reads(ex, [d.id for d in members], tally)
    found = reads.members()
    if len(found) < 2:
        return None
    actor_id, namespace = members[0].actor_id, members[0].namespace
    plan = plan_group(
        found,
        reads.vectors(found),
        grouping=ex.policy.grouping,
        weights=ex.policy.source_weights,
        planner_survivor=next((d.survivor for d in members if d.survivor), None),
        merge_unread=_merges_unread(ex),
    )
    if plan is None or not plan.roles:
        tally.counts["conflicting_left_for_review"] += len(plan.conflicting) if plan else 0
        if memo_key is not None and not ex.dry_run:
            ex.journal.remember_outcome(memo_key, actor_id, namespace, NO_MERGE, None, ex.cutoff)
        return None
    if ex.consolidator is None:
        tally.counts["consolidation_skipped"] += 1
        return None
    sent = reads.records(plan.to_model)
    model_group = Group(
        key=key,
        actor_id=actor_id,
        namespace=namespace,
        subject=plan.members[0].subject,
        records=[sent[i] for i in plan.to_model],
        survivor_id=plan.survivor_id,
        superseded_ids=plan.contradicted_to_model,
        recurring=plan.promote,
    )
    tally.counts["over_cap_superseded_by_rule"] += plan.over_cap
    # a dry run keeps no rejections (backing_off, reject): its key is never looked up
    gkey = "" if ex.dry_run else model_group.consolidation_key()
    vkey = None if ex.dry_run else key  # a verdict's key: a dry run journals none
    if backing_off(ex, gkey, tally, key):
        return None
    try:
        result = consolidate(ex, model_group)  # a dry run's answer where one was kept
    except ConsolidationError as exc:
        # every request sent costs, whatever became of it
        tally.model_calls += exc.requests
        tally.input_tokens += exc.input_tokens
        tally.output_tokens += exc.output_tokens
        if exc.usage_estimated:  # the answer carried no usage
            tally.counts["model_usage_estimated"] += 1
        # a verdict (kept apart, refused) is journaled: a throttled batch's retry reads it
        # as standing, so it is counted apart, once over the attempts (apply/carry.py)
        v = Tally() if exc.code == KEEP_APART or not exc.retryable else tally
        v.rejections[exc.code] += 1
        v.counts["consolidation_rejected"] += 1
        if exc.code == KEEP_APART:  # an answer, not a failure: settled until a member changes
            v.counts["consolidation_kept_apart"] += 1
            tally.verdict(vkey, v)
            remember(ex, memo_key, model_group, KEPT_APART)
        elif not exc.retryable:  # the answer was refused (grounding, schema): back off
            retry_at = reject(ex, model_group, gkey, exc.code, v)
            tally.verdict(vkey, v)
            remember(ex, memo_key, model_group, REFUSED, retry_at)
        else:
            # the model was not reached, or the run's key/model is wrong: no group's fault,
            # nothing remembered (the next run sends it again), but a run that consolidated
            # nothing for this reason must say so in its counts (unavailable.py: unless
            # the service answered the batch's other groups)
            tally.counts["consolidation_model_unavailable"] += 1
            if exc.code == MODEL_MISCONFIGURED:
                tally.counts["consolidation_model_misconfigured"] += 1
            if exc.code == Reason.MODEL_UNAVAILABLE and exc.requests:  # judged at the batch end
                with ex.unavailable_lock:
                    ex.unavailable.append((model_group, gkey, memo_key))
        return None  # originals untouched
    if result.reused:  # what a dry run was answered: no call tonight
        tally.counts["model_answers_reused"] += 1
    else:
        tally.model_calls += result.requests or (1 if result.model else 0)
    tally.input_tokens += result.input_tokens
    tally.output_tokens += result.output_tokens
    if result.usage_estimated:  # the answer carried no usage: its tokens are estimates
        tally.counts["model_usage_estimated"] += 1
    # a dry run calls no model (unless --with-model); it estimates what an apply run's would
    # cost, none when that run consolidates extractively (memo_as: who an apply run asks)
    if not result.model and ex.dry_run and not (ex.memo_as or "").startswith(EXTRACTIVE):
        from memlife.consolidate.estimate import estimate_input_tokens

        tally.counts["estimated_model_calls"] += 1
        tally.counts["estimated_input_tokens"] += estimate_input_tokens(model_group)
    if not ex.dry_run and _erased_text(ex, model_group, result.summary):
        # the write would refuse it (ERASED_CONTENT) and withdraw the group, remembering
        # nothing: the same answer was asked for every night. A refusal backs off instead.
        v = Tally()
        v.rejections[ERASED_CONTENT] += 1
        v.counts["consolidation_rejected"] += 1
        retry_at = reject(ex, model_group, gkey, ERASED_CONTENT, v)
        tally.verdict(vkey, v)
        remember(ex, memo_key, model_group, REFUSED, retry_at)
        return None
    if not ex.dry_run and ex.journal.rejection(gkey) is not None:
        ex.journal.clear_rejection(gkey)
        if memo_key is not None:
            ex.journal.forget_outcome(memo_key)
    roles = plan.roles
    tally.counts["merged_duplicates"] += sum(1 for r in roles.values() if r.endswith("DUPLICATE"))
    tally.counts["contradictions_resolved"] += sum(1 for r in roles.values() if r == CONTRADICTION)
    if ex.dry_run:  # staged all the same: a dry run's gate sees what an apply run would write
        tally.counts["consolidation_proposed"] += 1
    # members the merge leaves out (past MAX_MEMBERS, conflicting): they stay, retained
    tally.counts["unmerged_kept_records"] += len(members) - len(plan.members)
    # a model wrote the recurring event as a lasting fact; an extractive copy of an event
    # is no such fact, so offline the merged repeats stay episodic
    promoted = plan.promote and result.model is not None
    tally.counts["episodic_promoted"] += int(promoted)
    if ex.dry_run and not ex.evaluated:
        # no gate reads it and nothing commits it: only where the group is counts (the
        # pipeline keeps no more), so its replacement and operations are not built
        return StagedRef((actor_id, namespace))
    replacement = build_from_members(
        actor_id, namespace, plan.members, plan.survivor_id, result, ex.cutoff,
        ex.policy.version, MemoryType.semantic if promoted else None,
        ex.policy.ttl_days(),
        # the id is keyed by the store's run secret: it goes wherever ids go (a dry run's
        # gate names it too), and unkeyed it gave the members' texts back (audit 50c)
        secret=ex.replacement_secret(),
        retired=_retired(members, roles, result.outdated_ids),
    )  # fmt: skip
    write = ex.new_op(
        OpKind.write_replacement,
        actor_id,
        namespace,
        replacement.id,
        ["CONSOLIDATION", *(c for c in sorted({r.value for d in members for r in d.reasons}))],
        content_sha256(replacement.content),
        payload=replacement.to_json(),
        key_ids=[replacement.id],
    )
    supersedes = [
        ex.new_op(
            OpKind.supersede,
            actor_id,
            namespace,
            m.id,
            ["SAME_SUBJECT", roles[m.id]],
            m.sha,
            replacement=replacement.id,
        )
        for m in plan.members
    ]
    return StagedGroup(replacement, write, supersedes, memo_key)


def _merges_unread(ex: Executor) -> bool:
    """May the rules alone merge records past the model's seats (group_plan.plan_group)?
    Only offline: the extractive consolidator reads no member's text anyway. A model's
    answer is checked against the records it read, so one it never read waits for a later
    night (audit 53c). A dry run plans as its apply run would consolidate (memo_as)."""
    who = ex.memo_as or f"{getattr(ex.consolidator, 'name', '')}:"
    return who.startswith(EXTRACTIVE)


def _retired(members: Sequence[Decision], roles: Mapping[str, str],
             outdated: Sequence[str]) -> set[str]:  # fmt: skip
    """Members whose statement the replacement retires, not carries: the planner's older,
    other statements (staging's cosine may call one a near duplicate: "Blood type is A+"
    / "B+"), the contradicted, the outdated. Their verification is not the replacement's."""
    planned = {d.id for d in members if d.action is Action.supersede_candidate}
    return planned | {i for i, role in roles.items() if role == CONTRADICTION} | {*outdated}


def commit_group(ex: Executor, staged: StagedGroup | StagedRef, tally: Tally) -> None:
    """Carry out a staged group: journal write + supersedes as one unit, then run them."""
    if ex.dry_run or not isinstance(staged, StagedGroup):
        return
    if staged.shard in ex.stopped:  # the store stopped the shard: its members stay as they
        tally.counts["shard_stopped_records"] += len(staged.supersedes)  # are (audit 51vii)
        return
    planned = ex.plan([staged.write, *staged.supersedes])  # one transaction
    checkpoint("after_journal_write")
    resume_group(ex, planned, tally)


def _erased_text(ex: Executor, group: Group, summary: str) -> bool:
    """Does the answer say a text the actor erased (a faithful merge of two rewordings)? Not
    where a member's own text was erased since the group was read (an erasure racing the
    night): the write then withdraws the group, and the next night regroups without it."""
    blank = Provenance()
    probe = group.records[0].model_copy(update={"content": summary, "provenance": blank})
    if refusal(ex.store, probe) != ERASED_CONTENT:
        return False
    return not any(
        refusal(ex.store, m.model_copy(update={"provenance": blank})) for m in group.records
    )
