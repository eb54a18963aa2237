"""Run reports on S3 (``MEMLIFE_STATE=dynamodb://...&parquet=s3://bucket/prefix``).

Layout, Hive-partitioned by the run's cutoff date::

    {prefix}/reports/date=YYYY-MM-DD/run_id={run_id}/attempt={a}/proposed-actions.parquet (+ .jsonl)
    {prefix}/reports/date=YYYY-MM-DD/run_id={run_id}/attempt={a}/parts/{part}.jsonl  child batches

A worker writes its report in a temporary folder (never under ``$MEMLIFE_HOME``) and
uploads it when closed; child batches on other machines upload their JSONL part, and the
parent run downloads and merges the parts before it converts the report to Parquet.
"""

from __future__ import annotations

import shutil
from datetime import datetime
from pathlib import Path

from memlife.outcomes import seal, unseal
from memlife.run_types import BatchOutcome, RunContext
from memlife.state.dynamodb import DynamoState


def report_prefix(state: DynamoState, run_id: str, cutoff: datetime, attempt: str | None) -> str:
    """Per run attempt, as the local reports: two attempts of one run never share a file."""
    base = state.settings.parquet_prefix
    path = f"reports/date={cutoff:%Y-%m-%d}/run_id={run_id}/attempt={attempt or 'first'}"
    return f"{base}/{path}" if base else path


def _url(state: DynamoState, key: str) -> str:
    return f"s3://{state.settings.parquet_bucket}/{key}"


def upload_part(
    state: DynamoState, run_id: str, cutoff: datetime, attempt: str | None, part: str, jsonl: Path
) -> str:
    key = f"{report_prefix(state, run_id, cutoff, attempt)}/parts/{part}.jsonl"
    state.s3.put_object(Bucket=state.settings.parquet_bucket, Key=key, Body=jsonl.read_bytes())
    return _url(state, key)


def download_parts(
    state: DynamoState, run_id: str, cutoff: datetime, attempt: str | None, folder: Path
) -> list[str]:
    """Child parts into ``folder/<part>/<stem>.jsonl`` (ReportWriter.merge_parts' layout)."""
    prefix = f"{report_prefix(state, run_id, cutoff, attempt)}/parts/"
    keys: list[str] = []
    paginator = state.s3.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=state.settings.parquet_bucket, Prefix=prefix):
        keys += [o["Key"] for o in page.get("Contents", []) if o["Key"].endswith(".jsonl")]
    for k in sorted(keys):
        part = folder / Path(k).stem
        part.mkdir(parents=True, exist_ok=True)
        body = state.s3.get_object(Bucket=state.settings.parquet_bucket, Key=k)["Body"].read()
        (part / "proposed-actions.jsonl").write_bytes(body)
    return keys


def upload_report(
    state: DynamoState, run_id: str, cutoff: datetime, attempt: str | None, jsonl: Path,
    parquet: Path, merged_parts: list[str],
) -> tuple[str, str]:  # fmt: skip
    """Upload the closed report, drop the merged parts, remove the local folder."""
    prefix = report_prefix(state, run_id, cutoff, attempt)
    bucket = state.settings.parquet_bucket
    out = []
    for path, ctype in (
        (jsonl, "application/x-ndjson"),
        (parquet, "application/vnd.apache.parquet"),
    ):
        key = f"{prefix}/{path.name}"
        state.s3.put_object(Bucket=bucket, Key=key, Body=path.read_bytes(), ContentType=ctype)
        out.append(_url(state, key))
    for k in merged_parts:  # the merged report holds them now
        state.s3.delete_object(Bucket=bucket, Key=k)
    shutil.rmtree(jsonl.parent, ignore_errors=True)
    return out[0], out[1]


# -- child batch outcomes: the parent reads them here, no shared Prefect result storage ----
def _outcome_key(
    state: DynamoState, run_id: str, cutoff: datetime, attempt: str | None, part: str
) -> str:
    return f"{report_prefix(state, run_id, cutoff, attempt)}/outcomes/{part}.pickle"


def put_outcome(state: DynamoState, ctx: RunContext, part: str, outcome: BatchOutcome) -> None:
    """A child batch's BatchOutcome (counts, failed shard names, delete items: ids and hashes,
    no content; a gated run's staged replacements) in the run's own bucket, sealed."""
    body = seal(ctx, outcome)
    key = _outcome_key(state, ctx.run_id, ctx.cutoff, ctx.config.attempt, part)
    state.s3.put_object(Bucket=state.settings.parquet_bucket, Key=key, Body=body)


def get_outcome(state: DynamoState, ctx: RunContext, part: str) -> BatchOutcome:
    key = _outcome_key(state, ctx.run_id, ctx.cutoff, ctx.config.attempt, part)
    body = state.s3.get_object(Bucket=state.settings.parquet_bucket, Key=key)["Body"].read()
    # sealed by this run, then only the types an outcome holds load (memlife/outcomes.py)
    return unseal(ctx, body, f"s3://{state.settings.parquet_bucket}/{key}")


def delete_outcomes(state: DynamoState, run_id: str, cutoff: datetime, attempt: str | None) -> int:
    """Remove the attempt's child outcomes once its receipt is written: they hold the staged
    replacement texts (memlife/outcomes.py); returns how many were removed."""
    prefix = f"{report_prefix(state, run_id, cutoff, attempt)}/outcomes/"
    bucket = state.settings.parquet_bucket
    n = 0
    for page in state.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            state.s3.delete_object(Bucket=bucket, Key=obj["Key"])
            n += 1
    return n
