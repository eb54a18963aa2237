"""uint8 x int8 -> int32 matrix product through onnxruntime (token alignment's inner loop).

numpy has no fast integer product: its float product needed every candidate token's 384
bits turned into floats first, and that conversion cost more than the product (50 memories
of 573 tokens: 44 MB written a query). onnxruntime's MatMulInteger multiplies the 0/1
bytes directly. The one-node graph ships in ``memlife/_data`` (built by
``scripts/build_int8_matmul.py``) and is sha256-checked before it is loaded, as the
embedding model is.
"""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import onnxruntime as ort

GRAPH_PATH = Path(__file__).parent / "_data" / "int8_matmul.onnx"
GRAPH_SHA256 = "6c806af5f58f60aeb53d3f107fbeec9a086274ab93479315260537a49e4f8d9e"

_lock = threading.Lock()
_session: ort.InferenceSession | None = None


def _load() -> ort.InferenceSession:
    import onnxruntime as ort  # loaded on first use, as the embedder loads it

    global _session
    with _lock:
        if _session is None:
            data = GRAPH_PATH.read_bytes()
            got = hashlib.sha256(data).hexdigest()
            if got != GRAPH_SHA256:
                raise RuntimeError(
                    f"{GRAPH_PATH} has sha256 {got}, expected {GRAPH_SHA256}; refusing to load"
                )
            options = ort.SessionOptions()
            # One thread: a recall's product is a few ms (50 observations: 0.2 ms; 50
            # memories of 573 tokens: 3.6 ms), and a pool of its own would compete with
            # the embedder's threads in the same query.
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
            _session = ort.InferenceSession(
                data, sess_options=options, providers=["CPUExecutionProvider"]
            )
        return _session


def matmul_u8s8(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """int32 (n, t) = a (n, k) @ b (k, t): ``a`` uint8 of 0/1 (sign bits), ``b`` int8.

    Exact for entries of ``a`` up to 128: on CPUs without VNNI, onnxruntime's u8 x s8
    kernel adds pairs of products in int16, which saturates for larger bytes (255 x 127)."""
    if a.dtype != np.uint8 or b.dtype != np.int8 or a.shape[1] != b.shape[0]:
        raise ValueError(
            f"matmul_u8s8 takes uint8 (n, k) and int8 (k, t): {a.dtype}{a.shape}, {b.dtype}{b.shape}"
        )
    if not a.size or not b.shape[1]:  # an empty side: nothing to add (k = 0 included)
        return np.zeros((len(a), b.shape[1]), dtype=np.int32)
    session = _session or _load()
    out: np.ndarray = session.run(
        None, {"a": np.ascontiguousarray(a), "b": np.ascontiguousarray(b)}
    )[0]
    return out
