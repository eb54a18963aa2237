"""Audit 44i (session 44): who sweeps a run id's other attempts on remote state (outcome_sweep.sweep_for_run).

Only an apply run, holding the store's lease, may take another attempt of its run id for
dead. A dry run takes no lease: two dry runs at one cutoff share a run id, and both live.
"""

from __future__ import annotations

from pathlib import Path

from memlife.outcome_sweep import sweep_for_run
from memlife.pipeline import RunConfig
from memlife.run_start import start_run
from memlife.state.reports import report_prefix
from tests.support.aws_state import aws_state
from tests.unit.test_erasure_stale_outcomes import NOW


def test_a_dry_run_on_remote_state_never_sweeps_another_attempt(home: Path) -> None:
    """The adversary starts a second dry run at the same cutoff while the first one's
    children have staged their outcomes on S3: the second (no lease) must leave them."""
    from memlife.outcomes import _remote_key
    from memlife.state.dynamodb import key

    with aws_state("inprocess") as (url, state):
        ctx = start_run(RunConfig(dry_run=True, now=NOW, state=url))
        staged = f"{report_prefix(state, ctx.run_id, NOW, 'live')}/outcomes/0.pickle"
        bucket = state.settings.parquet_bucket
        state.s3.put_object(Bucket=bucket, Key=staged, Body=b"sealed")
        _remote_key(state, f"{ctx.run_id}.live")
        sweep_for_run(ctx, state, holds_lease=False)
        listed = state.s3.list_objects_v2(Bucket=bucket).get("Contents", [])
        assert [o["Key"] for o in listed] == [staged]
        assert state.get(key("outkey", f"{ctx.run_id}.live")) is not None
