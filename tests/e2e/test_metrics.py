"""CloudWatch metrics of run counts, against moto."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from memlife.pipeline import RunConfig, run_local
from tests.support.lifecycle import CUTOFF, gate_cases, seed


def test_counts_published_to_cloudwatch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path))
    for k, v in {
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(k, v)
    seed(tmp_path / "memlife.db", records=120)
    monkeypatch.setenv("MEMLIFE_EVAL_CASES", gate_cases(tmp_path / "memlife.db"))
    with mock_aws():
        summary = run_local(RunConfig(dry_run=False, now=CUTOFF, metrics_namespace="MemLife/Test"))
        cw = boto3.client("cloudwatch", region_name="us-east-1")
        metrics = {m["MetricName"] for m in cw.list_metrics(Namespace="MemLife/Test")["Metrics"]}
        assert metrics == set(summary.lifecycle)
        stats = cw.get_metric_statistics(
            Namespace="MemLife/Test",
            MetricName="deleted",
            StartTime=CUTOFF.replace(hour=0),
            EndTime=CUTOFF.replace(hour=23),
            Period=86400,
            Statistics=["Sum"],
            Dimensions=[
                {"Name": "Mode", "Value": "apply"},
                {"Name": "PolicyVersion", "Value": summary.policy_version},
            ],
        )
        assert stats["Datapoints"][0]["Sum"] == summary.lifecycle["deleted"] > 0


def test_no_namespace_no_metrics(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLIFE_HOME", str(tmp_path))
    monkeypatch.delenv("MEMLIFE_CLOUDWATCH_NAMESPACE", raising=False)
    from memlife.metrics import publish_counts

    assert (
        publish_counts({"deleted": 1}, mode="apply", policy_version="v", timestamp=CUTOFF) is False
    )
