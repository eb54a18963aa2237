"""The bundled MiniLM embedder: real model, real tokenizer, no downloads."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from memlife import embed as embed_mod
from memlife.embed import (
    DIM,
    MAX_WINDOWS,
    MODEL_SHA256,
    TOKENIZER_PATH,
    TOKENIZER_SHA256,
    Embedder,
    EmbeddingModelError,
    MiniLMEmbedder,
    default_embedder,
)


@pytest.fixture(scope="module")
def emb() -> MiniLMEmbedder:
    return default_embedder()


def test_bundled_tokenizer_is_the_pinned_file() -> None:
    assert hashlib.sha256(TOKENIZER_PATH.read_bytes()).hexdigest() == TOKENIZER_SHA256


def test_protocol_shape_and_normalisation(emb: MiniLMEmbedder) -> None:
    assert isinstance(emb, Embedder)
    assert emb.model_id == "all-MiniLM-L6-v2-onnx-int8" and emb.dim == DIM == 384
    v = emb.embed(["I only drink green tea.", "The car is red.", "x"])
    assert v.dtype == np.float32 and v.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert emb.embed([]).shape == (0, 384)


def test_semantics(emb: MiniLMEmbedder) -> None:
    q, tea, car, meeting = emb.embed(
        [
            "What do I usually drink?",
            "I only drink green tea, never coffee.",
            "My car needs new tyres.",
            "The budget meeting moved to Thursday.",
        ]
    )
    assert q @ tea > q @ car + 0.1 and q @ tea > q @ meeting + 0.1


def test_deterministic_and_batch_independent(emb: MiniLMEmbedder) -> None:
    texts = ["short", "a somewhat longer sentence about hiking in the alps", "tea"]
    a = emb.embed(texts)
    b = emb.embed(texts)
    np.testing.assert_array_equal(a, b)
    # Padding to a longer batch must not change a text's vector (mask-aware pooling).
    alone = emb.embed(["short"])[0]
    np.testing.assert_allclose(a[0], alone, atol=1e-5)
    # Order is restored after the length sort.
    np.testing.assert_allclose(emb.embed(texts[::-1])[::-1], a, atol=1e-5)


def test_a_long_text_is_cut_into_windows_of_256_tokens(emb: MiniLMEmbedder) -> None:
    ids, mask, starts = emb.tokenize(["word " * 2000, "hi"])
    # 2,000 tokens: MAX_WINDOWS windows of 256 (each with its [CLS] and [SEP]), then "hi"
    assert ids.shape == (MAX_WINDOWS + 1, 256) and starts.tolist() == [0, MAX_WINDOWS]
    assert (mask[:MAX_WINDOWS].sum(axis=1) == 256).all() and mask[MAX_WINDOWS].sum() == 3
    assert (ids[:MAX_WINDOWS, 0] == 101).all() and (ids[:MAX_WINDOWS, 255] == 102).all()
    # The vector is the first window's: anything past it cannot influence the vector.
    head = "alpha beta gamma " * 100
    a, b = emb.embed([head + "tea coffee", head + "volcano earthquake"])
    np.testing.assert_allclose(a, b, atol=1e-6)
    v, codes = emb.embed_with_tokens([head + "tea coffee", "hi"])
    np.testing.assert_allclose(v[0], a, atol=1e-6)  # the same vector from either call
    assert len(codes[0]) == 302 and len(codes[1]) == 1  # every window's tokens, no marks


def test_an_answer_past_the_first_window_is_found_by_token_alignment(
    emb: MiniLMEmbedder,
) -> None:
    """Two long memories alike in their first 256 tokens, told apart only by their last
    sentence, and a question sharing no word with either: the vectors tie, BM25 scores
    nothing, and the token codes of the later windows decide."""
    from memlife.lexical import LexicalIndex
    from memlife.retrieval import rank

    filler = "We chatted about the weather and the traffic on the way home. " * 30
    texts = [
        filler + "By the way, my car needs new tyres before winter.",
        filler + "By the way, I only drink green tea, never coffee.",
    ]
    vecs, codes = emb.embed_with_tokens(texts)
    np.testing.assert_allclose(vecs[0], vecs[1], atol=1e-6)
    question = "Which beverage is preferred?"
    qv, qt = emb.embed_query(question)
    common = {"query_text": question, "lexical": LexicalIndex(texts), "threshold": -1.0}
    assert not LexicalIndex(texts).scores(question).any()
    hits = rank(
        qv, vecs, k=2, query_tokens=qt, token_codes=lambda rows: [codes[r] for r in rows], **common
    )
    assert list(hits.indices) == [1, 0] and hits.scores[0] > hits.scores[1]
    # a long text's codes do not depend on the batch it is embedded in
    _, alone = emb.embed_with_tokens([texts[1]])
    assert np.array_equal(alone[0].bits, codes[1].bits)


def test_every_call_sees_the_same_first_window(emb: MiniLMEmbedder) -> None:
    """embed (one window) and embed_with_tokens / embed_query (more) must give one text one
    vector, even when the text is mostly whitespace and the character cut decides what
    the first window holds."""
    from memlife.token_match import MAX_QUERY_TOKENS

    t = "The user drinks tea." + " " * 9000 + "Volcanoes and earthquakes shook the town. " * 10
    a = emb.embed([t])[0]
    b, _ = emb.embed_with_tokens([t])
    q, qt = emb.embed_query(t)
    np.testing.assert_allclose(a, b[0], atol=1e-6)
    np.testing.assert_allclose(a, q, atol=1e-6)
    _, long_q = emb.embed_query("volcano tremor lava " * 200)  # a page pasted as a question
    assert len(long_q) == MAX_QUERY_TOKENS and len(qt) <= MAX_QUERY_TOKENS


def test_rejects_a_bare_string(emb: MiniLMEmbedder) -> None:
    with pytest.raises(TypeError):
        emb.embed("not a list")  # type: ignore[arg-type]


def test_default_embedder_is_a_singleton() -> None:
    assert default_embedder() is default_embedder()


def test_model_sha_mismatch_raises() -> None:
    with pytest.raises(EmbeddingModelError, match="sha256"):
        MiniLMEmbedder(model_sha256="0" * 64)


def test_tampered_tokenizer_raises(tmp_path: Path) -> None:
    bad = tmp_path / "tokenizer.json"
    shutil.copy(TOKENIZER_PATH, bad)
    with bad.open("ab") as f:
        f.write(b" ")
    with pytest.raises(EmbeddingModelError, match="tokenizer"):
        MiniLMEmbedder(tokenizer_path=bad)


def test_tokenizer_is_parsed_on_first_use_from_the_bytes_checked(tmp_path: Path) -> None:
    """A warm night never tokenizes: construction checks the file but parses nothing (~12 MB
    a process); the first text parses the very bytes that were checked, even if the file
    changes afterwards."""
    copy = tmp_path / "tokenizer.json"
    shutil.copy(TOKENIZER_PATH, copy)
    fresh = MiniLMEmbedder(tokenizer_path=copy)
    assert fresh._tok_parsed is None
    copy.write_text("{}")  # swapped after the check: not what gets parsed
    ids, mask, _ = fresh.tokenize(["green tea, never coffee"])
    assert fresh._tok_parsed is not None
    want_ids, want_mask, _ = default_embedder().tokenize(["green tea, never coffee"])
    assert ids.tolist() == want_ids.tolist() and mask.tolist() == want_mask.tolist()


def test_missing_model_raises(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingModelError, match="not found"):
        MiniLMEmbedder(model_path=tmp_path / "nope.onnx")


def test_threads_are_explicit() -> None:
    e = MiniLMEmbedder(intra_op_threads=1)
    assert e.intra_op_threads == 1 and e.inter_op_threads == 1
    np.testing.assert_allclose(e.embed(["tea"]), default_embedder().embed(["tea"]), atol=1e-5)


def _default_optimised() -> Path:
    default_embedder().embed(["tea"])  # the session exists, so the derived copy does too
    e = default_embedder()
    path = embed_mod.optimised_model(e._mpath, MODEL_SHA256, embed_mod.model_cache_dir())
    assert path is not None and path.name == "model.onnx"
    return path.parent


def test_model_cache_is_a_user_cache_never_memlife_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert embed_mod.model_cache_dir() == tmp_path / "xdg" / "memlife"
    monkeypatch.setenv("MEMLIFE_MODEL_CACHE", str(tmp_path / "mc"))
    assert embed_mod.model_cache_dir() == tmp_path / "mc"


def test_optimised_copy_gives_the_vectors_of_in_process_optimisation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    texts = ["I only drink green tea.", "The budget meeting moved to Thursday.", "x"]
    cached = default_embedder().embed(texts)
    _default_optimised()
    monkeypatch.setattr(embed_mod, "optimised_model", lambda *a: None)
    in_process = MiniLMEmbedder(intra_op_threads=1).embed(texts)
    np.testing.assert_allclose(cached, in_process, atol=1e-5)


@pytest.mark.parametrize("damage", ["flip a weight byte", "lose the graph", "lose the manifest"])
def test_corrupt_or_missing_optimised_copy_is_rebuilt(tmp_path: Path, damage: str) -> None:
    folder = tmp_path / "cache" / _default_optimised().name
    shutil.copytree(_default_optimised(), folder)
    good = {p.name: p.read_bytes() for p in folder.iterdir()}
    if damage == "flip a weight byte":
        with (folder / "weights.bin").open("r+b") as f:
            f.seek(1 << 20)
            byte = f.read(1)
            f.seek(1 << 20)
            f.write(bytes([byte[0] ^ 0xFF]))
    else:
        (folder / ("model.onnx" if damage == "lose the graph" else "sha256.json")).unlink()
    src = default_embedder()._mpath
    path = embed_mod.optimised_model(src, MODEL_SHA256, tmp_path / "cache")
    assert path == folder / "model.onnx"
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == good  # rebuilt, same bytes
    assert not [p for p in (tmp_path / "cache").iterdir() if p.name.startswith(".build")]


def test_an_abandoned_build_is_swept_and_a_recent_one_left(tmp_path: Path) -> None:
    import os
    import time

    cache = tmp_path / "cache"
    old, recent = cache / ".build-old", cache / ".build-recent"
    for d in (old, recent):
        d.mkdir(parents=True)
        (d / "weights.bin").write_bytes(b"partial")
    past = time.time() - embed_mod.STALE_BUILD_SECONDS - 60
    os.utime(old, (past, past))
    assert embed_mod.optimised_model(default_embedder()._mpath, MODEL_SHA256, cache) is not None
    assert not old.exists() and recent.exists()  # another process may still be building it


def test_no_home_means_no_cache_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMLIFE_MODEL_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)

    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    assert embed_mod.model_cache_dir() is None
    assert embed_mod.optimised_model(default_embedder()._mpath, MODEL_SHA256, None) is None


def test_unwritable_cache_falls_back_to_optimising_in_process(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache folder should be")
    monkeypatch.setenv("MEMLIFE_MODEL_CACHE", str(blocker))
    assert embed_mod.optimised_model(default_embedder()._mpath, MODEL_SHA256, blocker) is None
    e = MiniLMEmbedder(intra_op_threads=1)
    np.testing.assert_allclose(e.embed(["tea"]), default_embedder().embed(["tea"]), atol=1e-5)


def _rewrite_manifest(folder: Path) -> None:
    """What someone who can write the cache does: change a file, then its manifest entry."""
    import json

    manifest = {
        n: hashlib.sha256((folder / n).read_bytes()).hexdigest()
        for n in ("model.onnx", "weights.bin")
    }
    (folder / "sha256.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize("tamper", ["zero weights", "garbage graph"])
def test_a_derived_copy_tampered_with_its_manifest_is_never_used(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tamper: str
) -> None:
    texts = ["I only drink green tea.", "The budget meeting moved to Thursday."]
    folder = tmp_path / "cache" / _default_optimised().name
    shutil.copytree(_default_optimised(), folder)
    if tamper == "zero weights":
        with (folder / "weights.bin").open("r+b") as f:
            f.seek(1 << 20)
            f.write(bytes(8 << 20))  # loads fine, computes something else
    else:
        (folder / "model.onnx").write_bytes(b"not a graph")
    _rewrite_manifest(folder)
    assert embed_mod._intact(folder)  # the manifest cannot tell
    monkeypatch.setenv("MEMLIFE_MODEL_CACHE", str(tmp_path / "cache"))
    got = MiniLMEmbedder(intra_op_threads=1).embed(texts)
    np.testing.assert_allclose(got, default_embedder().embed(texts), atol=1e-5)
    assert not folder.exists()  # dropped: the next process builds a fresh copy
    assert embed_mod.optimised_model(default_embedder()._mpath, MODEL_SHA256, tmp_path / "cache")
    assert embed_mod._intact(folder)


def test_the_pinned_probe_answer_is_what_the_model_computes() -> None:
    import onnxruntime as ort

    for path, level in (
        (default_embedder()._mpath, ort.GraphOptimizationLevel.ORT_ENABLE_ALL),
        (_default_optimised() / "model.onnx", ort.GraphOptimizationLevel.ORT_DISABLE_ALL),
    ):
        opts = ort.SessionOptions()
        opts.graph_optimization_level = level
        sess = ort.InferenceSession(
            str(path), sess_options=opts, providers=["CPUExecutionProvider"]
        )
        assert embed_mod.answers_probe(sess)


def test_discarding_moves_the_copy_aside_before_deleting_it(tmp_path: Path) -> None:
    # another process may hold the files open: a rename keeps them readable for it
    folder = tmp_path / "minilm-x"
    folder.mkdir()
    (folder / "weights.bin").write_bytes(b"w")
    held = (folder / "weights.bin").open("rb")
    embed_mod.discard(folder)
    assert not folder.exists() and held.read() == b"w"
    assert not list(tmp_path.iterdir())
    embed_mod.discard(folder)  # already gone: nothing to do


@pytest.mark.timeout(120)  # a build waited for (not killed at 2 s) hangs here, and fails
@pytest.mark.parametrize("then", ["sys.exit(3)", "time.sleep(3600)"])
def test_a_failing_or_hung_build_falls_back_and_leaves_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, then: str
) -> None:
    pid_file = tmp_path / "child.pid"
    child = f"import os, sys, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); {then}"
    monkeypatch.setattr(embed_mod, "_OPTIMISE", child)
    monkeypatch.setattr(embed_mod, "BUILD_TIMEOUT_SECONDS", 2)
    cache = tmp_path / "cache"
    assert embed_mod.optimised_model(default_embedder()._mpath, MODEL_SHA256, cache) is None
    with pytest.raises(ProcessLookupError):  # the hung child was killed, not left running
        os.kill(int(pid_file.read_text()), 0)
    assert list(cache.iterdir()) == []  # no partial build left behind
    monkeypatch.setenv("MEMLIFE_MODEL_CACHE", str(cache))
    e = MiniLMEmbedder(intra_op_threads=1)
    np.testing.assert_allclose(e.embed(["tea"]), default_embedder().embed(["tea"]), atol=1e-5)
