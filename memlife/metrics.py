"""Run counts as CloudWatch metrics (optional): one datum per count, dimensioned by run mode.

Enabled by a namespace (``--metrics-namespace`` or MEMLIFE_CLOUDWATCH_NAMESPACE). A
metrics failure never fails a run: the counts are already in the run receipt.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from memlife.settings import settings

log = logging.getLogger(__name__)


def publish_counts(
    counts: Mapping[str, int],
    *,
    namespace: str | None = None,
    mode: str,
    policy_version: str,
    timestamp: datetime,
    client: Any = None,
    already: Mapping[str, int] | None = None,
) -> bool:
    """One datum per count. ``already``: what earlier attempts of this run published (its
    last partial_failure receipt's counts, ``run_receipts.published_counts``): a rerun that
    finishes one sends the difference, so the night's Sum is its last receipt's. It sent
    its counts again, cumulative over every attempt (the journal's): a 3-record night
    summed to processed 6, deleted 3, failed 1 beside a receipt.2.json saying deleted 2,
    failed 0 (audit 53o). A difference may be negative (failed 1, then 0)."""
    namespace = namespace or settings().cloudwatch_namespace
    if not namespace:
        return False
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    cw = client or boto3.client("cloudwatch")
    dims = [{"Name": "Mode", "Value": mode}, {"Name": "PolicyVersion", "Value": policy_version}]
    data = [
        {
            "MetricName": name,
            "Dimensions": dims,
            "Timestamp": timestamp,
            "Value": float(value - (already or {}).get(name, 0)),
            "Unit": "Count",
        }
        for name, value in counts.items()
    ]
    try:
        for i in range(0, len(data), 1000):  # PutMetricData takes at most 1,000 data
            cw.put_metric_data(Namespace=namespace, MetricData=data[i : i + 1000])
        return True
    except (BotoCoreError, ClientError) as exc:
        log.warning("CloudWatch metrics not published: %s", type(exc).__name__)
        return False
