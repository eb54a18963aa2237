"""Build memlife/_data/int8_matmul.onnx: one MatMulInteger node (uint8 x int8 -> int32).

Token alignment (memlife/token_match.py) multiplies a memory's token sign bits, unpacked to
0/1 bytes, by the question's token states rounded to int8. numpy has no fast integer
product, and the float product needs every bit turned into a float first (the cost of
the term on long memories); onnxruntime's MatMulInteger does it in integers. onnxruntime
cannot build a graph, so the graph is built here, once, with the `onnx` package, and
shipped (a few hundred bytes, sha256-pinned in memlife/int8_matmul.py):

    uv run --with onnx==1.17.0 python scripts/build_int8_matmul.py
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import onnx
from onnx import TensorProto, helper

OUT = Path(__file__).resolve().parent.parent / "memlife" / "_data" / "int8_matmul.onnx"


def build() -> bytes:
    a = helper.make_tensor_value_info("a", TensorProto.UINT8, ["n", "k"])
    b = helper.make_tensor_value_info("b", TensorProto.INT8, ["k", "t"])
    out = helper.make_tensor_value_info("out", TensorProto.INT32, ["n", "t"])
    node = helper.make_node("MatMulInteger", ["a", "b"], ["out"])
    graph = helper.make_graph([node], "int8_matmul", [a, b], [out])
    model = helper.make_model(
        graph, producer_name="memlife", opset_imports=[helper.make_opsetid("", 13)]
    )
    model.ir_version = 7  # read by every onnxruntime memlife supports (>= 1.20)
    onnx.checker.check_model(model)
    return model.SerializeToString()


if __name__ == "__main__":
    data = build()
    OUT.write_bytes(data)
    print(f"{OUT} {len(data)} bytes sha256 {hashlib.sha256(data).hexdigest()}")
