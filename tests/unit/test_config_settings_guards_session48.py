"""Session 48 (audit 48vii): guards of the settings and the state URL that no test held (each test
below fails with the mutation its docstring names)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlife.state import parse_state_url

URL = "dynamodb://memlife-state?region=eu-west-1&parquet=s3://b/p"


def test_a_child_run_carries_the_state_the_parent_read_from_its_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Adversary: the parent nightly runs on a worker whose state comes from MEMLIFE_STATE
    (the deployed way; no ``state`` in the flow's config); its shard children run on other
    workers, whose environment may lack it. Must hold: the children's parameters name the
    parent's state, so they write outcomes and report parts where the parent reads them
    (docs/orchestration.md). The multi-worker e2e test passes ``state`` in the config, so
    ``config_params`` without ``or state_url()`` (`memlife/fanout.py`) went unnoticed."""
    from memlife import fanout
    from memlife.run_types import RunConfig

    monkeypatch.setenv("MEMLIFE_STATE", URL)
    assert fanout.config_params(RunConfig(dry_run=False))["state"] == URL
    given = URL.replace("memlife-state", "other")  # the config's own state still comes first
    assert fanout.config_params(RunConfig(dry_run=False, state=given))["state"] == given


def test_a_state_url_without_a_region_reads_aws_default_region(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Adversary: a worker configured the AWS CLI's way (only AWS_DEFAULT_REGION, as ECS
    task definitions and ``aws configure`` leave it) and a state URL naming no region.
    Must hold: the region is AWS_DEFAULT_REGION (the URL's own wins; AWS_REGION before
    AWS_DEFAULT_REGION, as boto3 reads them). Kills dropping ``AWS_DEFAULT_REGION`` from
    ``parse_state_url``'s fallback (the run was then refused: "region missing")."""
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ap-south-1")
    bare = "dynamodb://memlife-state?parquet=s3://b/p"
    got = parse_state_url(bare)
    assert got is not None and got.region == "ap-south-1"
    monkeypatch.setenv("AWS_REGION", "eu-north-1")
    got = parse_state_url(bare)
    assert got is not None and got.region == "eu-north-1"
    got = parse_state_url(URL)
    assert got is not None and got.region == "eu-west-1"


def test_an_empty_unknown_memlife_variable_counts_as_unset(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adversary: a deployment template leaves ``MEMLIFE_LEASE_TTL_SECOND=`` (a typo'd name
    whose value expanded to nothing), or an operator blanks an old variable instead of
    unsetting it. Must hold: an empty variable counts as unset (settings.py: "An empty
    variable counts as unset"), so it is no refusal, while the same name with a value is
    refused naming the setting meant. Kills ``and value`` dropped from
    ``settings._unknown``: every command then exited 2 over a variable that says nothing."""
    from memlife.errors import SettingsError
    from memlife.settings import settings

    monkeypatch.setenv("MEMLIFE_LEASE_TTL_SECOND", "")
    assert settings().lease_ttl_seconds == 120.0
    monkeypatch.setenv("MEMLIFE_LEASE_TTL_SECOND", "30")
    with pytest.raises(SettingsError, match="MEMLIFE_LEASE_TTL_SECONDS"):
        settings()
