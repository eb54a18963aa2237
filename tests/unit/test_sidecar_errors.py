"""A failing DynamoDB sidecar stops the shard with a StoreError (code, no content)."""

from __future__ import annotations

import boto3
import pytest
from moto import mock_aws

from memlife.stores.agentcore_sidecar import Sidecar
from memlife.stores.base import StoreError


def test_missing_sidecar_table_is_a_store_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in {
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "x",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(k, v)
    with mock_aws():
        sidecar = Sidecar(boto3.client("dynamodb", region_name="us-east-1"), "no-such-table")
        with pytest.raises(StoreError) as info:
            sidecar.get("m-1")
        assert info.value.code == "SIDECAR_ResourceNotFoundException"
        with pytest.raises(StoreError):
            sidecar.actors()
        sidecar.create_table()
        assert sidecar.get("m-1") is None  # a working table answers normally
