"""A retried parent flow starts its own child runs (session 44, after audit 44b's note).

With ``fan_out: deployments`` the parent starts one child flow run per batch with an
idempotency key. The key named the parent flow run, the run id and the part, so a Prefect
retry of the parent (the same flow run, a new attempt) was handed its finished children
back: their outcomes were sealed by the failed attempt's key under its folder, which that
attempt's failure path had removed, so every batch of the retry failed to read one. The
key now names the attempt too. What Prefect's ``run_deployment`` is asked is read at that
boundary (the call is refused there: no server is needed to see the request).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import flows.shard
from memlife.run_start import start_run
from memlife.run_types import RunConfig, Shard
from memlife.stores.sqlite import SqliteStore

NOW = datetime(2026, 11, 1, 12, tzinfo=UTC)


class Asked(Exception):
    pass


def test_a_retried_parent_does_not_take_its_failed_attempts_children(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    SqliteStore(home / "memlife.db").close()
    keys: list[str] = []

    def run_deployment(deployment: str, **kw: Any) -> Any:
        keys.append(kw["idempotency_key"])
        raise Asked

    monkeypatch.setattr(flows.shard, "run_deployment", run_deployment)
    for attempt in ("first-attempt", "retry-attempt"):  # one run id, two attempts
        ctx = start_run(RunConfig(dry_run=False, now=NOW, attempt=attempt))
        with pytest.raises(Asked):
            flows.shard.fan_out_deployments(ctx, [[Shard("u-1", "/users/u-1/facts")]])
    assert len(keys) == 2 and keys[0] != keys[1]
    assert all(k.endswith(":0") for k in keys)  # still one key per part
