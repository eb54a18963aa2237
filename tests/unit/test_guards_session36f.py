"""Session 36f mutation audit of the embedding model and its cache (memlife/embed.py,
memlife/embed_cache.py, memlife/int8_matmul.py) and of the lifecycle policy
(memlife/policy.py, memlife/policy_record.py): each test holds one guard that a mutant
showed untested, and fails when that guard alone is removed or loosened. Real components:
the pinned MiniLM model (offline, from its package), onnxruntime, SQLite caches, policies
written as YAML files in tmp_path. No memlife logic is replaced."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memlife import embed as embed_mod
from memlife.embed import MODEL_SHA256, MiniLMEmbedder, default_embedder
from memlife.embed_cache import EmbeddingCache
from memlife.model import MemoryType, content_sha256
from memlife.policy import PolicyError, load_policy


@pytest.fixture(scope="module")
def emb() -> MiniLMEmbedder:
    return default_embedder()


# -- 1. embed.py: windows are run in slices of batch_size, each row once -----------------------
def test_windows_run_in_small_slices_give_the_vectors_of_one_slice(emb: MiniLMEmbedder) -> None:
    """Attacks the slice ``v[lo : lo + self.batch_size]`` in MiniLMEmbedder._forward: with
    one row too many a slice overlaps the next, every later window shifts by one, and the
    second text's vector is pooled from the first text's last window."""
    texts = [
        "Lisbon is sunny and the tram climbs the hill to the castle. " * 45,
        "The budget meeting moved to Thursday because the auditors are late. " * 40,
    ]
    small = MiniLMEmbedder(intra_op_threads=1, batch_size=2)
    ids, _, starts = small.tokenize(texts)
    assert len(ids) >= 5 and list(starts) == [0, 3]  # three windows each: several slices
    got, _ = small.embed_with_tokens(texts)
    want, _ = emb.embed_with_tokens(texts)
    np.testing.assert_allclose(got, want, atol=1e-4)


# -- 2. embed.py: the session never busy-waits unless asked ----------------------------------
def test_the_session_does_not_spin_unless_asked() -> None:
    """Attacks ``spin_flag = "1" if self._spin else "0"`` in _load_session: spinning
    workers burn the cores the agent runs on (a shared machine: a query several times
    slower). Read back from the session onnxruntime built."""
    quiet = MiniLMEmbedder(intra_op_threads=1)
    quiet.embed(["tea"])
    opts = quiet._session().get_session_options()
    for key in ("session.intra_op.allow_spinning", "session.inter_op.allow_spinning"):
        assert opts.get_session_config_entry(key) == "0"
    busy = MiniLMEmbedder(intra_op_threads=1, spin=True)
    busy.embed(["tea"])
    opts = busy._session().get_session_options()
    assert opts.get_session_config_entry("session.intra_op.allow_spinning") == "1"
    assert (opts.intra_op_num_threads, opts.inter_op_num_threads) == (1, 1)


# -- 3. embed.py: the default thread count is bounded -----------------------------------------
def test_the_default_thread_count_is_at_most_four_and_at_least_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Attacks ``min(4, ...)`` and ``max(1, ...)`` in default_threads: onnxruntime's own
    default takes every core, which starves the agent process on a large machine."""
    monkeypatch.setattr(os, "cpu_count", lambda: 64)
    assert embed_mod.default_threads() == 4
    assert MiniLMEmbedder().intra_op_threads == 4
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert embed_mod.default_threads() == 1


# -- 4. embed.py: the probe refuses a derived copy that computes something close but else -----
class _Answering:
    """A real onnxruntime session of the pinned model whose output is then changed: what a
    derived copy that loads fine but computes something else answers."""

    def __init__(self, change: str) -> None:
        import onnxruntime as ort

        self._sess = ort.InferenceSession(
            str(default_embedder()._mpath), providers=["CPUExecutionProvider"]
        )
        self._change = change

    def get_inputs(self) -> list:
        return self._sess.get_inputs()

    def run(self, names: object, feeds: dict) -> list:
        out = np.asarray(self._sess.run(None, feeds)[0])
        if self._change == "shifted":
            return [out + np.float32(0.02)]
        if self._change == "cut":
            return [out[:, :, :8]]
        return [out]


@pytest.mark.parametrize("change", ["shifted", "cut"])
def test_a_derived_copy_answering_the_probe_almost_right_is_refused(change: str) -> None:
    """Attacks answers_probe: ``atol=1e-3`` (loosened to 0.1, a copy shifted by 0.02 in every
    dimension passed) and the ``out.shape != (2, 16, DIM)`` check (removed, a copy that
    returns 8 dimensions and those right passed, and its vectors would have been 8-d)."""
    assert embed_mod.answers_probe(_Answering("none"))  # the unchanged model answers
    assert not embed_mod.answers_probe(_Answering(change))


# -- 5. embed.py: a derived copy is keyed by the onnxruntime that built it ---------------------
def test_a_derived_copy_built_by_another_onnxruntime_is_not_reused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Attacks ``onnxruntime {ort.__version__}`` in optimised_model's key: an optimised graph
    is onnxruntime's own output (fused operators of that version); another version must
    derive its own copy, never load the old one. The rebuild is made to fail (no
    interpreter), so the answer is None rather than the other version's copy."""
    import shutil
    import sys

    import onnxruntime as ort

    src = default_embedder()._mpath
    derived = embed_mod.optimised_model(src, MODEL_SHA256, embed_mod.model_cache_dir())
    assert derived is not None
    cache = tmp_path / "cache"
    shutil.copytree(derived.parent, cache / derived.parent.name)
    assert embed_mod.optimised_model(src, MODEL_SHA256, cache) == (
        cache / derived.parent.name / "model.onnx"
    )
    monkeypatch.setattr(ort, "__version__", ort.__version__ + ".other")
    monkeypatch.setattr(sys, "executable", "")
    assert embed_mod.optimised_model(src, MODEL_SHA256, cache) is None


# -- 6. embed.py: a question is read in one window --------------------------------------------
def test_a_questions_tokens_come_from_its_first_window_only(emb: MiniLMEmbedder) -> None:
    """Attacks ``windows=1`` in MiniLMEmbedder.embed_query: each content token of a question
    costs the alignment a pass over every candidate token, and the question's vector is
    its first window's; a word past 256 tokens is not one of its tokens."""
    _, near = emb.embed_query("the " * 10 + "Lisbon")
    assert len(near) == 1  # "lisbon" is a content token
    vec, far = emb.embed_query("the " * 300 + "Lisbon")
    assert len(far) == 0
    np.testing.assert_allclose(vec, emb.embed(["the " * 300 + "Lisbon"])[0], atol=1e-5)


# -- 7. embed_cache.py: a row whose bytes are not dim floats is re-embedded -------------------
def test_a_vector_row_of_the_wrong_byte_length_is_re_embedded(
    tmp_path: Path, emb: MiniLMEmbedder
) -> None:
    """Attacks ``len(blob) == 4 * dim`` in EmbeddingCache._lookup: a row that says dim 384
    but holds 8 floats (a torn or foreign write) is stale and embedded again, never read
    as a vector (without the check: a ValueError out of recall, or a short vector)."""
    text = "Prefers the aisle seat on short flights."
    cache = EmbeddingCache(emb, path=tmp_path / "emb.db")
    try:
        short = np.ones(8, dtype=np.float32) / np.sqrt(8)
        cache.connection.execute(  # type: ignore[union-attr]
            "INSERT INTO embeddings VALUES (?, ?, ?, ?)",
            (content_sha256(text), emb.model_id, emb.dim, short.tobytes()),
        )
        got = cache.get_or_embed_texts([text])
        np.testing.assert_allclose(got, emb.embed([text]), atol=1e-5)
        assert (cache.stats.hits, cache.stats.misses) == (0, 1)
        again = EmbeddingCache(emb, path=tmp_path / "emb.db")  # the row was rewritten
        try:
            np.testing.assert_allclose(again.get_or_embed_texts([text]), got, atol=0)
            assert again.stats.hits == 1
        finally:
            again.close()
    finally:
        cache.close()


# -- 8. embed_cache.py: what is embedded without being stored is not kept in memory either ----
def test_a_vector_embedded_with_store_false_is_not_kept_in_the_recent_memory(
    tmp_path: Path, emb: MiniLMEmbedder
) -> None:
    """Attacks ``{**cached, **fresh} if store else cached`` in get_or_embed_texts: a text
    the gate only evaluates (no record's content) is embedded with ``store=False``; erasure
    finds vectors by erased records' contents, so one kept in the run's recent memory
    would outlive the text it came from, and be served again."""
    text = "A replacement the gate only evaluates."
    cache = EmbeddingCache(emb, path=tmp_path / "emb.db", recent=100)
    try:
        cache.get_or_embed_texts([text], store=False)
        cache.get_or_embed_texts([text], store=False)
        assert (cache.stats.hits, cache.stats.misses) == (0, 2)
        assert len(cache) == 0
        cache.get_or_embed_texts([text])  # stored: then it is remembered
        cache.get_or_embed_texts([text], store=False)
        assert cache.stats.hits == 1
    finally:
        cache.close()


# -- 9. int8_matmul.py: the integer product takes exactly its operand types ------------------
def test_the_integer_product_refuses_operands_of_another_type_or_shape() -> None:
    """Attacks the dtype and shape checks in matmul_u8s8 (each removed): an operand of
    another type (int8 left, uint8 or int16 right) or sides that do not chain is a
    ValueError naming both operands, raised before onnxruntime sees them; without the
    checks it was onnxruntime's own InvalidArgument or a kernel failure mid-recall."""
    from memlife.int8_matmul import matmul_u8s8

    a = np.ones((2, 8), np.uint8)
    b = np.ones((8, 3), np.int8)
    assert matmul_u8s8(a, b).tolist() == [[8, 8, 8], [8, 8, 8]]
    for left, right in (
        (a.astype(np.int8), b),
        (a, b.astype(np.uint8)),
        (a, b.astype(np.int16)),
        (a, np.ones((7, 3), np.int8)),
    ):
        with pytest.raises(ValueError, match="matmul_u8s8 takes uint8"):
            matmul_u8s8(left, right)
    assert matmul_u8s8(a, np.ones((8, 0), np.int8)).shape == (2, 0)


# -- 10. policy.py: every bound of a duration, count or threshold is refused by key -----------
def _default_policy() -> dict:
    import yaml

    return yaml.safe_load((REPO / "policies" / "default.yaml").read_text())


def _set(data: dict, dotted: str, value: object) -> None:
    """Set ``dotted`` (list indexes as numbers), making missing sections on the way."""
    *head, last = dotted.split(".")
    node: Any = data
    for part in head:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


def _policy_file(tmp_path: Path, changes: dict[str, object]) -> Path:
    import yaml

    data = _default_policy()
    for dotted, value in changes.items():
        _set(data, dotted, value)
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


REPO = Path(__file__).resolve().parents[2]
SEM = "memory_types.semantic"
BAD_VALUES = [
    # (dotted key, value, the guard in memlife/policy.py it attacks)
    ("memory_types.episodic.default_ttl_days", 0, "TypePolicy.default_ttl_days gt=0"),
    ("memory_types.episodic.default_ttl_days", 36_501, "TypePolicy.default_ttl_days le=MAX_DAYS"),
    (f"{SEM}.verification_stale_days", 0, "TypePolicy.verification_stale_days gt=0"),
    (f"{SEM}.verification_stale_days", 1e6, "TypePolicy.verification_stale_days le=MAX_DAYS"),
    (f"{SEM}.frequency_scale", 0, "TypePolicy.frequency_scale gt=0"),
    (f"{SEM}.frequency_scale", float("inf"), "_Strict allow_inf_nan=False"),
    (f"{SEM}.low_score", -0.1, "TypePolicy.low_score ge=0"),
    ("grouping.near_duplicate_cosine", 1.5, "Grouping.near_duplicate_cosine le=1"),
    ("grouping.near_duplicate_cosine", 0, "Grouping.near_duplicate_cosine gt=0"),
    ("grouping.max_group_size", 1, "Grouping.max_group_size ge=2"),
    ("grouping.max_group_size", 101, "Grouping.max_group_size le=100"),
    ("grouping.grounding_cosine", 2, "Grouping.grounding_cosine le=1"),
    ("grouping.episodic_to_semantic_min", 1, "Grouping.episodic_to_semantic_min ge=2"),
    ("owners.0.namespace", "", "OwnerRule.namespace min_length=1"),
    ("owners.0.owner", "", "OwnerRule.owner min_length=1"),
    ("owners.0.memory_types", ["semantik"], "OwnerRule.memory_types list[MemoryType]"),
    ("review.waiting_listed", 50_001, "ReviewPolicy.waiting_listed le=50_000"),
    ("review.waiting_priority_per_day", -1, "ReviewPolicy.waiting_priority_per_day ge=0"),
    ("review.frequent_access_count", 0, "ReviewPolicy.frequent_access_count ge=1"),
    ("review.keep_answers_days", 0, "ReviewPolicy.keep_answers_days ge=1"),
    ("review.stale_classes", ["sensitve"], "ReviewPolicy.stale_classes list[RetentionClass]"),
    ("verification.verified_at_write", ["user_confirmd"], "VerificationPolicy list[Source]"),
    ("inference.enabled", 1, "InferencePolicy.enabled Strict bool"),
    ("inference.topic_cosine", 1.5, "InferencePolicy.topic_cosine le=1"),
    ("inference.max_leaders", 0, "InferencePolicy.max_leaders ge=1"),
    ("inference.merge_cosine", 1.5, "InferencePolicy.merge_cosine le=1"),
    ("gate.required", 0, "GatePolicy.required Strict bool (Flag)"),
    ("gate.must_retain_recall_min", 1.5, "GatePolicy.must_retain_recall_min le=1"),
    ("gate.forbidden_retrieval_max", -0.1, "GatePolicy.forbidden_retrieval_max ge=0"),
    ("limits.content_max_bytes", 16 * 1024 * 1024 + 1, "Limits.content_max_bytes le=16 MiB"),
    ("enforce_deletion_in", ["/users/./facts"], "_namespace_glob '.' segment"),
    ("superseded_retention_days.standard", 36_501, "superseded_retention_days le=MAX_DAYS"),
    ("pending_delete_grace_days", -1, "Policy.pending_delete_grace_days ge=0"),
    ("sensitivity_penalty.sensitive", 2, "Policy.sensitivity_penalty Share (le=1)"),
]


@pytest.mark.parametrize(
    ("dotted", "value", "guard"), BAD_VALUES, ids=[f"{d}={v!r}" for d, v, _ in BAD_VALUES]
)
def test_a_value_out_of_its_bounds_is_refused_naming_its_key(
    tmp_path: Path, dotted: str, value: object, guard: str
) -> None:
    """Attacks each bound named in ``guard`` (mutated: the bound loosened or removed, the
    type made lax; each mutant survived the earlier tests): a zero or negative span, a
    count or threshold out of range, an unknown class, type or source, a number where a
    flag belongs. Each is a PolicyError naming the file and the key, never a policy that
    silently behaves otherwise (a zero TTL expires everything, a cosine over 1 groups
    nothing, ``enabled: 1`` is a typo, not a decision)."""
    path = _policy_file(tmp_path, {dotted: value})
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    key = dotted.rsplit(".", 1)[0] if dotted.endswith(".0") else dotted
    assert f"key '{key}" in str(info.value), (guard, str(info.value))
    assert str(path) in str(info.value)


def test_every_bound_itself_is_accepted(tmp_path: Path) -> None:
    """The other side of the bounds above: the extreme values each guard allows load (so
    the refusals are of the values, not of the keys)."""
    at_bounds: dict[str, object] = {
        "memory_types.episodic.default_ttl_days": 36_500,
        f"{SEM}.verification_stale_days": 0.5,
        f"{SEM}.frequency_scale": 0.001,
        f"{SEM}.low_score": 0,
        "grouping.near_duplicate_cosine": 1,
        "grouping.max_group_size": 2,
        "grouping.grounding_cosine": 1,
        "grouping.episodic_to_semantic_min": 2,
        "review.waiting_listed": 50_000,
        "review.waiting_priority_per_day": 0,
        "review.frequent_access_count": 1,
        "review.keep_answers_days": 1,
        "inference.max_leaders": 1,
        "gate.must_retain_recall_min": 1,
        "gate.forbidden_retrieval_max": 0,
        "limits.content_max_bytes": 16 * 1024 * 1024,
        "superseded_retention_days.standard": 36_500,
        "pending_delete_grace_days": 0,
        "sensitivity_penalty.sensitive": 1,
    }
    policy = load_policy(_policy_file(tmp_path, at_bounds))
    assert policy.grouping.max_group_size == 2
    assert policy.memory_types[MemoryType.episodic].default_ttl_days == 36_500


# -- 11. policy.py: an owners rule's glob is held to what enforce_deletion_in's are ------------
@pytest.mark.parametrize("glob", ["users/*/**", "/users/*/** ", "/users/../**"])
def test_an_owner_rule_glob_no_namespace_could_match_is_refused(tmp_path: Path, glob: str) -> None:
    """A real bug the audit found: a policy typo silently changed behaviour. policy.py's own
    reason for _namespace_glob ("a typo such as 'users/*/episodes' matched nothing ...
    silently") holds for the owners rules too, and they were not checked:
    ``owners[0].namespace = "users/*/**"`` in a copy of policies/default.yaml loaded, and
    ``policy.owner_for("u-1", "/users/u-1/facts", "semantic")`` was None (default: "u-1"),
    so every such record became a MISSING_OWNER review item. Refused by key now."""
    path = _policy_file(tmp_path, {"owners.0.namespace": glob})
    with pytest.raises(PolicyError, match=r"key 'owners\.0\.namespace'"):
        load_policy(path)


def test_an_owner_rule_shadowed_by_an_earlier_one_is_refused(tmp_path: Path) -> None:
    """A gap the audit found: a rule that can never apply is a typo to refuse by name, not
    a silent no-op. Appending ``{namespace: "/users/*/**", owner: "team-facts",
    memory_types: [semantic]}`` to the default's owners loaded, and ``owner_for("u-1",
    "/users/u-1/facts", "semantic")`` was still "u-1" (the first matching rule wins). A
    rule under an earlier rule's glob and types is refused; one the earlier rule covers
    only in part (another type, a namespace outside it) still loads."""
    import yaml

    data = _default_policy()
    data["owners"].append(
        {"namespace": "/users/*/**", "owner": "team-facts", "memory_types": ["semantic"]}
    )
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(PolicyError, match=r"owners.*rule 2 .*never applies"):
        load_policy(path)
    data["owners"][-1] = {
        "namespace": "/users/*/notes",
        "owner": "t",
        "memory_types": ["procedural"],
    }
    path.write_text(yaml.safe_dump(data))
    assert load_policy(path).owner_for("u-1", "/users/u-1/notes", "procedural") == "t"
    data["owners"][-1] = {"namespace": "/teams/*/**", "owner": "t", "memory_types": ["semantic"]}
    path.write_text(yaml.safe_dump(data))
    assert load_policy(path).owner_for("u-1", "/teams/a/notes", "semantic") == "t"


# -- 12. policy_record.py: a version's file stays one file in the policies folder -------------
@pytest.mark.parametrize("version", ["../../receipts/run-1", "a/b", "v1/../../x"])
def test_a_version_naming_a_path_keeps_its_policy_in_one_file_of_the_policies_folder(
    version: str,
) -> None:
    """Attacks ``quote(plain, safe='')`` in policy_key: without it a version with a '/'
    names a key outside ``policies/`` (another receipt's name, with '..'), so a policy
    could be kept over, or compared with, a file that is no policy."""
    from memlife.policy_record import policy_key

    key = policy_key(version)
    assert key.startswith("policies/") and key.endswith(".yaml")
    assert "/" not in key[len("policies/") :]
    assert policy_key(version.upper()) == key  # one file for a look-alike spelling


def test_versions_that_differ_only_in_unicode_form_are_one_version() -> None:
    """Attacks ``unicodedata.normalize("NFKC", ...)`` in policy_key: "café" composed and
    decomposed, or "v1" in full-width letters, read the same in a receipt; without the
    normalisation each was a new version, so a policy edited under its version (every TTL
    one day) passed as another one instead of being refused."""
    from memlife.policy_record import policy_key

    assert policy_key("caf\u00e9-2026") == policy_key("cafe\u0301-2026")
    assert policy_key("\uff56\uff11") == policy_key("v1")
    assert policy_key("v1") != policy_key("v2")
