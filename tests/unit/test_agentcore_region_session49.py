"""Session 49 (left by audit 48vii, now fixed): an AgentCore URL without ``?region=``.

``agentcore://M`` was opened in us-east-1 while boto3, the state URL and the operator's
shell all read AWS_REGION; and its store identity (the run key, the home's lease) said
``@`` with no region, so one memory named two ways was two stores. Both now read one rule
(`memlife.settings.aws_region`): the URL's region, else AWS_REGION / AWS_DEFAULT_REGION,
else us-east-1.
"""

from __future__ import annotations

import pytest

from memlife.state import parse_state_url
from memlife.stores import store_identity
from memlife.stores.agentcore import AgentCoreStore


@pytest.fixture
def no_region_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    return monkeypatch


def _opened_region(url: str) -> str:
    """The region the store's boto3 clients (built, never called) would sign for."""
    store = AgentCoreStore.from_url(url)
    regions = {c.meta.region_name for c in (store.client, store.control, store.sidecar.client)}
    assert regions == {store.region}
    return store.region


def test_a_url_without_region_opens_the_environments_region(no_region_env) -> None:
    no_region_env.setenv("AWS_REGION", "eu-west-1")
    assert _opened_region("agentcore://mem-1") == "eu-west-1"
    assert _opened_region("agentcore://mem-1?region=ap-south-1") == "ap-south-1"  # URL first


def test_aws_default_region_is_read_when_aws_region_is_not(no_region_env) -> None:
    no_region_env.setenv("AWS_DEFAULT_REGION", "eu-central-1")
    assert _opened_region("agentcore://mem-1") == "eu-central-1"
    assert store_identity("agentcore://mem-1") == "agentcore://mem-1@eu-central-1"


def test_one_memory_spelt_two_ways_is_one_store(no_region_env) -> None:
    no_region_env.setenv("AWS_REGION", "eu-west-1")
    bare = store_identity("agentcore://mem-1")
    assert bare == store_identity("agentcore://mem-1?region=eu-west-1")
    assert bare != store_identity("agentcore://mem-1?region=us-east-1")


def test_without_any_region_the_documented_default_is_both_read_and_named(no_region_env) -> None:
    assert _opened_region("agentcore://mem-1") == "us-east-1"
    assert store_identity("agentcore://mem-1") == "agentcore://mem-1@us-east-1"
    assert AgentCoreStore.from_url("agentcore://mem-1").url == (
        "agentcore://mem-1?region=us-east-1&sidecar_table=memlife-agentcore-sidecar"
    )


def test_the_state_url_reads_the_same_rule(no_region_env) -> None:
    no_region_env.setenv("AWS_DEFAULT_REGION", "eu-central-1")
    assert parse_state_url("dynamodb://t?parquet=s3://b/p").region == "eu-central-1"
