"""Audit 49x1: the embedding model file between its check and its load.

``MiniLMEmbedder`` checks the model file's sha256 when it is constructed and creates the
ONNX session on the first text it embeds (a warm night never does); the process-wide
embedder may wait hours in between. The tokenizer parses the very bytes it checked
(``test_embed.py::test_tokenizer_is_parsed_on_first_use_from_the_bytes_checked``); the
model was opened again by its path. Where the derived (graph-optimised) copy cannot be
used, a read-only cache or one not built yet, whatever file lay at that path by then
was loaded: a damaged one failed with onnxruntime's own protobuf error, a working model
of other weights was used silently. Real model, real onnxruntime; nothing mocked.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from memlife import embed as embed_mod
from memlife.embed import MODEL_SHA256, EmbeddingModelError, MiniLMEmbedder, default_embedder

TEXT = ["I only drink green tea, never coffee."]


@pytest.fixture()
def model_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the pinned model, with the derived-model cache where it cannot be written
    (a read-only home): the session is built in process from the source file."""
    copy = tmp_path / "model" / "model.onnx"
    copy.parent.mkdir()
    shutil.copy(default_embedder()._mpath, copy)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache folder should be")
    monkeypatch.setenv("MEMLIFE_MODEL_CACHE", str(blocker))
    return copy


def _other_weights(copy: Path) -> None:
    """Put a working model of other weights at ``copy``: the pinned graph (optimised
    copy, its float weights beside it) with 4 MB of its weights zeroed."""
    cache = copy.parent.parent / "derived"  # its own: the fixture blocked the user's cache
    derived = embed_mod.optimised_model(default_embedder()._mpath, MODEL_SHA256, cache)
    assert derived is not None
    shutil.copy(derived, copy)
    shutil.copy(derived.parent / "weights.bin", copy.parent / "weights.bin")
    with (copy.parent / "weights.bin").open("r+b") as f:
        f.seek(1 << 20)
        f.write(bytes(4 << 20))


def test_a_model_file_damaged_after_the_check_is_refused_by_its_sha256(model_copy: Path) -> None:
    emb = MiniLMEmbedder(model_path=model_copy)  # checked here
    data = model_copy.read_bytes()
    model_copy.write_bytes(data[: len(data) // 2])  # a torn copy, a full disk
    with pytest.raises(EmbeddingModelError, match="sha256"):
        emb.embed(TEXT)


def test_a_model_file_swapped_after_the_check_is_never_used(model_copy: Path) -> None:
    emb = MiniLMEmbedder(model_path=model_copy)  # checked here
    _other_weights(model_copy)
    with pytest.raises(EmbeddingModelError, match="sha256"):
        emb.embed(TEXT)


def test_a_swapped_file_is_not_loaded_after_its_derived_copy_fails_the_probe(
    model_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default set-up on a fresh machine: a writable cache with no derived copy yet.
    The copy built from the swapped file answers the pinned probe wrongly and is dropped;
    the source file itself must not be loaded in its place."""
    emb = MiniLMEmbedder(model_path=model_copy)  # checked here
    _other_weights(model_copy)
    monkeypatch.setenv("MEMLIFE_MODEL_CACHE", str(tmp_path / "fresh-cache"))
    with pytest.raises(EmbeddingModelError, match="sha256"):
        emb.embed(TEXT)


def test_control_the_other_weights_are_a_working_model_of_another_space(
    model_copy: Path,
) -> None:
    """What the swapped file is: a model that loads and embeds, about 0.77 in cosine from
    the pinned one (so it would have been mixed into the cache without a word)."""
    _other_weights(model_copy)
    want = default_embedder().embed(TEXT)[0]
    import onnxruntime as ort

    sess = ort.InferenceSession(str(model_copy), providers=["CPUExecutionProvider"])
    ids, mask, _ = default_embedder().tokenize(TEXT)
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    feeds = {k: v for k, v in feeds.items() if k in {i.name for i in sess.get_inputs()}}
    hidden = sess.run(None, feeds)[0]
    got = hidden[0].mean(axis=0)
    got /= np.linalg.norm(got)
    assert float(got @ want) < 0.95


def test_control_an_untouched_file_loads_in_process_and_embeds_as_the_default(
    model_copy: Path,
) -> None:
    emb = MiniLMEmbedder(model_path=model_copy)
    np.testing.assert_allclose(emb.embed(TEXT), default_embedder().embed(TEXT), atol=1e-5)
