"""Audit 49m1 (mutation pass over session 49): an AgentCore store's identity across the
upgrade, and the order the region variables are read in.

Session 49 (``settings.aws_region``) made ``agentcore://M`` name ``agentcore://M@us-east-1``
(or AWS_REGION's region) where it had named ``agentcore://M@``. That identity is what a
writer binds its home (``MEMLIFE_HOME/store``) or its DynamoDB state table to, on its first
night. A deployment that ran ``agentcore://M`` before session 49 had bound ``agentcore://M@``,
which meant us-east-1 (the store opened us-east-1 whatever the environment said): after
the upgrade every night on that very store was refused, HomeInUse or StateTableInUse,
"serves store agentcore://M@, not agentcore://M@us-east-1", until someone edited the
binding by hand.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memlife.lease import for_store
from memlife.state.dynamodb import StateTableInUse
from memlife.state.home import HomeInUse, check_home
from memlife.stores import store_identity
from memlife.stores.agentcore import AgentCoreStore
from tests.support.aws_state import aws_state

BEFORE_49 = "agentcore://mem-1@"  # what store_identity("agentcore://mem-1") said before


class NoFileStore:
    """A store whose state lives under MEMLIFE_HOME (AgentCore's): no SQLite file."""

    connection = None

    def __init__(self, url: str) -> None:
        self.url = url


@pytest.fixture
def no_region_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    return monkeypatch


def test_a_home_bound_before_the_upgrade_still_serves_its_store(home: Path, no_region_env) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "store").write_text(BEFORE_49 + "\n")
    store = NoFileStore("agentcore://mem-1")
    check_home(store, claim=True)  # HomeInUse on the code before the fix
    with for_store(store, "run-1", "nightly"):
        pass  # the night takes its lease


def test_a_state_table_bound_before_the_upgrade_still_serves_its_store() -> None:
    with aws_state("inprocess") as (_, state):  # AWS_DEFAULT_REGION=us-east-1, as it was
        state.check_store(BEFORE_49, claim=True)  # the first night, before session 49
        fresh = type(state)(state.settings)  # the upgraded worker's clients
        fresh.check_store(store_identity("agentcore://mem-1"), claim=True)


def test_control_a_home_bound_before_the_upgrade_refuses_another_region(
    home: Path, no_region_env
) -> None:
    """``agentcore://mem-1@`` was us-east-1's memory; the same URL now read in eu-west-1
    (AWS_REGION) reaches another memory, which that home does not serve."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "store").write_text(BEFORE_49 + "\n")
    no_region_env.setenv("AWS_REGION", "eu-west-1")
    with pytest.raises(HomeInUse, match="agentcore://mem-1@eu-west-1"):
        check_home(NoFileStore("agentcore://mem-1"), claim=True)


def test_control_a_state_table_of_another_memory_is_still_refused() -> None:
    with aws_state("inprocess") as (_, state):
        state.check_store("agentcore://mem-2@", claim=True)
        fresh = type(state)(state.settings)
        with pytest.raises(StateTableInUse):
            fresh.check_store(store_identity("agentcore://mem-1"), claim=True)


def test_aws_region_is_read_before_aws_default_region(no_region_env) -> None:
    """Kills the two variables read the other way round (docs/agentcore.md's order, and
    the state URL's since session 48): the store, its identity and the state URL agree."""
    no_region_env.setenv("AWS_REGION", "eu-west-1")
    no_region_env.setenv("AWS_DEFAULT_REGION", "eu-central-1")
    assert AgentCoreStore.from_url("agentcore://mem-1").region == "eu-west-1"
    assert store_identity("agentcore://mem-1") == "agentcore://mem-1@eu-west-1"
