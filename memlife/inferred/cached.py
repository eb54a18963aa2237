"""One shard's subject inference, answered from the derived cache when nothing it reads changed.

:func:`memlife.group.infer_subjects` is a pure function of the records without a subject
(ids, content, creation times, statement keys, polarity), the keys already known for them,
the policy and the embedding model. Every night re-ran it on every such record (a dry run
stores no inferred key, so every dry run inferred them all again: about a third of a
default dry run). The result (ids and keys only) is kept in memlife/derived.py under a
digest of exactly those inputs; a hit reads no record, no vector and infers nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memlife.derived import DerivedCache, derived_for, digest_rows, policy_digest
from memlife.embed_cache import EmbeddingCache
from memlife.group import InferenceItem, SubjectInference, infer_subjects
from memlife.model import MemoryRecord, PlanView
from memlife.policy import Policy
from memlife.stores import MemoryStore

KIND = "inference"


def inference_digest(
    views: Sequence[PlanView], known: Mapping[str, str], policy: Policy, model_id: str
) -> str:
    """Everything infer_subjects reads for these records: id, content (its sha256; the
    statement key and polarity are derived from it), creation time, a known key; the
    policy (inference and grouping thresholds) and the embedding model. Ids and keys are
    length-prefixed: no id can make two inputs read alike. PlanView by position: 0 id,
    7 created, 15 content_sha256, 16 statement key, 17 polarity."""
    ordered = sorted(views, key=lambda v: v[0])
    rows = [
        f"{len(v[0])}:{v[0]}\x1f{v[15]}\x1f{v[16]}\x1f{1 if v[17] else 0}\x1f{_known(known.get(v[0]))}"
        for v in ordered
    ]
    return digest_rows((KIND, policy_digest(policy), model_id), rows, [v[7] for v in ordered])


def _known(key: str | None) -> str:
    return "-" if key is None else f"{len(key)}:{key}"


def infer_shard(
    store: MemoryStore,
    shard: tuple[str, str],
    views: Sequence[PlanView],
    known: Mapping[str, str],
    policy: Policy,
    embeddings: EmbeddingCache,
    read: dict[str, MemoryRecord] | None = None,
    keep_read: int = 4096,
    stores_new: bool = False,
) -> SubjectInference:
    """Subjects, statement keys and probable updates for ``views`` (one shard's records
    without a subject). Records read to compute it go to ``read`` (up to ``keep_read``).

    ``stores_new``: the caller keeps ``found.new`` as known keys (an apply run), so the
    next night asks with ``known | new``. The row is kept under THAT question, with its
    answer: the same subjects (known keys are kept as they are), no new key, and the same
    statements and updates (they depend on the subjects, not on which were known). So the
    night after an apply is a hit, not one more miss (test_known_keys_change_no_answer)."""
    derived = derived_for(embeddings)
    key = ""
    if derived is not None:
        key = inference_digest(views, known, policy, embeddings.model_id)
        hit = derived.get(shard, KIND, key)
        if hit is not None:
            return decode(hit)
    found = _infer(store, views, known, policy, embeddings, read, keep_read)
    if derived is not None:
        kept = found
        if stores_new and found.new:
            key = inference_digest(views, {**known, **found.new}, policy, embeddings.model_id)
            kept = SubjectInference(found.subjects, {}, found.statements, found.updates)
        derived.put(shard, KIND, key, encode(kept))
    return found


def _infer(
    store: MemoryStore,
    views: Sequence[PlanView],
    known: Mapping[str, str],
    policy: Policy,
    embeddings: EmbeddingCache,
    read: dict[str, MemoryRecord] | None,
    keep_read: int,
) -> SubjectInference:
    from memlife.apply.appliers.base import get_many

    got = get_many(store, [v.id for v in views])
    if read is not None and len(got) <= keep_read:
        read.update(got)
    records = sorted(got.values(), key=lambda r: (r.created_at, r.id))
    by_id = {v.id: v for v in views}
    items = [InferenceItem(r.id, r.content, r.created_at.timestamp(), by_id[r.id].norm_sha256,
                           bool(by_id[r.id].negated)) for r in records]  # fmt: skip
    vectors = embeddings.get_or_embed(records)
    return infer_subjects(items, vectors, known=known, inference=policy.inference,
                          near_duplicate=policy.grouping.near_duplicate_cosine)  # fmt: skip


def encode(found: SubjectInference) -> dict[str, Any]:
    return {"subjects": found.subjects, "new": list(found.new), "statements": found.statements,
            "updates": found.updates}  # fmt: skip


def decode(value: dict[str, Any]) -> SubjectInference:
    subjects: dict[str, str] = value["subjects"]
    return SubjectInference(
        subjects, {i: subjects[i] for i in value["new"]}, value["statements"], value["updates"]
    )


__all__ = ["DerivedCache", "decode", "encode", "infer_shard", "inference_digest"]
