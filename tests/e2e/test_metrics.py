"""CloudWatch metrics of run counts, against moto."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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


def test_many_counts_are_sent_once_each_in_calls_of_at_most_1000(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """PutMetricData takes at most 1,000 data a call (session 35 audit: nothing held the
    slice in metrics.publish_counts). 2,500 counts go out in three calls of at most 1,000,
    each exactly once, as the requests boto3 sends to moto show."""
    from memlife.metrics import publish_counts

    for k, v in {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"}.items():
        monkeypatch.setenv(k, v)
    sent: list[list[str]] = []

    def record(params: dict[str, Any], **_: Any) -> None:  # the request as boto3 sends it
        sent.append([d["MetricName"] for d in params["MetricData"]])

    counts = {f"count_{n:04d}": n for n in range(2500)}
    with mock_aws():
        cw = boto3.client("cloudwatch", region_name="us-east-1")
        cw.meta.events.register("provide-client-params.cloudwatch.PutMetricData", record)
        assert publish_counts(counts, namespace="MemLife/Test", mode="apply",
                              policy_version="v1", timestamp=CUTOFF, client=cw)  # fmt: skip
        listed = cw.get_paginator("list_metrics").paginate(Namespace="MemLife/Test")
        names = [m["MetricName"] for page in listed for m in page["Metrics"]]
    assert [len(c) for c in sent] == [1000, 1000, 500]
    assert sorted(n for c in sent for n in c) == sorted(counts)
    assert sorted(names) == sorted(counts)  # moto holds each once
