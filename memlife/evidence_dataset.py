"""Files beside a run's receipts checked against its seals (``receipts verify``): the
operations Parquets of its folder, and its files of the receipts dataset.

``receipts history`` and the dataset's SQL views read the run's files under
``dataset/operations/date=.../run_id=<run>/``. Each seal names the file it wrote in the run
receipt's evidence (``dataset_key``, ``dataset_sha256``; since session 26), so a named file
must be there unchanged, and a file no receipt of the run names was never bound to it:
``DATASET_NOT_SEALED`` (one added beside the others rewrote what history read, even on a
create-only bucket). Files of runs sealed before that are checked by content: each must
hold the operations of one of the run's sealed Parquets, and the file a reader takes (the
greatest name) those of the run's result (``DATASET_MISMATCH``).
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Sequence
from typing import Any

import pyarrow.parquet as pq

from memlife.audit import ReceiptSink
from memlife.receipts_dataset import PREFIX, is_part_key

# what a dataset row and an operations-Parquet row both say of an operation
_SAID = ("operation_id", "actor_id", "namespace", "record_id", "action", "outcome", "state",
         "replacement_id", "content_sha256")  # fmt: skip
Seal = tuple[dict[str, Any], list[dict[str, Any]]]  # a receipt's evidence block, its Parquet rows


def run_folder(run_prefix: str, run_id: str) -> str:
    """The run's dataset folder: its day is the day of its ``runs/yyyy/mm/dd/`` folder."""
    _, yyyy, mm, dd, _ = run_prefix.split("/", 4)
    return f"{PREFIX}/date={yyyy}-{mm}-{dd}/run_id={run_id}/"


def verify_dataset(
    sink: ReceiptSink, run: Any, seals: Sequence[Seal], result: list[dict[str, Any]], v: Any
) -> None:
    """Problems of the run's dataset files go to ``v`` (module doc)."""
    try:
        folder = run_folder(run.prefix, run.run_id)
    except ValueError:  # a run folder outside runs/yyyy/mm/dd/: no dataset day to look in
        return
    parts = sorted(k for k in sink.list(folder) if is_part_key(k))
    named = {ev["dataset_key"]: ev.get("dataset_sha256") for ev, _ in seals
             if isinstance(ev.get("dataset_key"), str)}  # fmt: skip
    rows_of = {ev["dataset_key"]: rows for ev, rows in seals
               if isinstance(ev.get("dataset_key"), str)}  # fmt: skip
    for key, want in named.items():
        body = sink.get(key)
        if body is None:
            v.problem("DATASET_PART_MISSING", key=key)
        elif hashlib.sha256(body).hexdigest() != want:
            v.problem("DATASET_DIGEST_MISMATCH", key=key)
        elif (said := _part(sink, key, v)) is not None and said != _said(rows_of[key]):
            v.problem("DATASET_MISMATCH", key=key)  # a digest the adversary re-sealed
    if named:
        for key in parts:
            if key not in named:
                v.problem("DATASET_NOT_SEALED", key=key)
        return
    sealed = [_said(rows) for _, rows in seals]
    for key in parts:
        said = _part(sink, key, v)
        if said is None:
            continue
        # the file a reader takes must say the run's result; any other, one seal's rows
        if not (said == _said(result) if key == parts[-1] else said in sealed):
            v.problem("DATASET_MISMATCH", key=key)


def unnamed_parquet(sink: ReceiptSink, prefix: str, named: set[str], v: Any) -> None:
    """Every operations*.parquet of the run folder is named by one of its receipts: one no
    receipt names was never bound to the run's result (a receipt deleted and the run sealed
    again, or a Parquet added), PARQUET_NOT_SEALED."""
    for key in sorted(sink.list(f"{prefix}/")):
        name = key.rsplit("/", 1)[-1]
        if name.startswith("operations.") and name.endswith(".parquet") and key not in named:
            v.problem("PARQUET_NOT_SEALED", key=key)


def _said(rows: Sequence[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted(tuple(r.get(c) for c in _SAID) for r in rows)


def _part(sink: ReceiptSink, key: str, v: Any) -> list[tuple[Any, ...]] | None:
    body = sink.get(key)
    if body is None:
        return None
    try:
        return _said(pq.read_table(io.BytesIO(body)).to_pylist())
    except Exception as exc:  # noqa: BLE001 - a file that does not parse is a finding
        v.problem("DATASET_UNREADABLE", key=key, error=type(exc).__name__)
        return None
