"""The Prefect flow under prefect_test_harness: same counts as run_local, counts artifact."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memlife.demo import generate
from memlife.pipeline import RunConfig, run_local
from memlife.plan import Action
from memlife.stores.sqlite import SqliteStore

ANCHOR = datetime(2026, 11, 1, tzinfo=UTC)
N = 1200


def _seed(path: Path) -> None:
    store = SqliteStore(path)
    try:
        store.put_many(list(generate(N, seed=9, anchor=ANCHOR, markers=True)))
    finally:
        store.close()


def _read_jsonl(path: str) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def _artifact_rows(key: str) -> list[dict]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey
    from prefect.client.schemas.sorting import ArtifactSort

    with get_client(sync_client=True) as client:
        arts = client.read_artifacts(
            artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=[key])),
            sort=ArtifactSort.CREATED_DESC,
            limit=1,
        )
    assert arts, f"no artifact {key!r}"
    data = arts[0].data
    return json.loads(data) if isinstance(data, str) else data


def test_flow_matches_run_local_and_creates_counts_artifact(home: Path, prefect_harness) -> None:
    from flows.nightly import nightly

    home.mkdir(parents=True, exist_ok=True)
    db = home / "memlife.db"
    _seed(db)
    local = run_local(RunConfig(dry_run=True, now=ANCHOR))
    local_rows = sorted(_read_jsonl(local.report), key=lambda r: r["id"])

    result = nightly(
        {"dry_run": True, "now": ANCHOR.isoformat(), "shards_per_batch": 7, "page_size": 50}
    )

    assert result["run_id"] == local.run_id
    assert result["policy_version"] == local.policy_version
    assert result["cutoff"] == ANCHOR.isoformat()
    assert result["counts"] == local.counts
    assert sum(result["counts"].values()) == result["records"] == N
    assert sorted(_read_jsonl(result["report"]), key=lambda r: r["id"]) == local_rows

    rows = _artifact_rows("memlife-counts")
    by_name = {}
    for row in rows:
        values = list(row.values())
        by_name[str(values[0])] = row.get("records", values[-1])
    for action in Action:
        assert by_name.get(action.value) == local.counts[action.value], (action, rows)


def test_flow_scope_filters(home: Path, prefect_harness) -> None:
    from flows.nightly import nightly

    home.mkdir(parents=True, exist_ok=True)
    _seed(home / "memlife.db")
    result = nightly(
        RunConfig(
            dry_run=True,
            now=ANCHOR,
            namespaces=("/users/*/support",),
            actors=("u-000004", "u-000005"),
        )
    )
    rows = _read_jsonl(result["report"])
    assert rows
    assert {r["actor_id"] for r in rows} <= {"u-000004", "u-000005"}
    assert all(r["namespace"].endswith("/support") for r in rows)
    local = run_local(
        RunConfig(
            dry_run=True,
            now=ANCHOR,
            namespaces=("/users/*/support",),
            actors=("u-000004", "u-000005"),
        )
    )
    assert result["counts"] == local.counts


@pytest.mark.parametrize("bad", [{"page_size": "many"}, {"dry_run": "perhaps"}])
def test_flow_validates_parameters(home: Path, prefect_harness, bad: dict) -> None:
    from flows.nightly import nightly

    with pytest.raises(Exception) as info:
        nightly({"now": ANCHOR.isoformat(), **bad})
    assert next(iter(bad)) in str(info.value)


def test_the_flow_refuses_a_far_future_apply_cutoff_and_pins_its_own(
    home: Path, prefect_harness
) -> None:
    """Adversarial review (Prefect): the 48-hour guard lived in the CLI only; a flow run
    with `now: 9999-12-30` expired and deleted 59 of 300 records. The flow refuses it
    before anything is read (unless allow_future_cutoff), and without `now` its cutoff is
    the flow run's scheduled start: a retry of the same flow run is the same run."""
    from flows.nightly import nightly

    home.mkdir(parents=True, exist_ok=True)
    db = home / "memlife.db"
    _seed(db)
    before = SqliteStore(db)
    try:
        count = before.count()
    finally:
        before.close()
    with pytest.raises(Exception, match="more than 48 h ahead"):
        nightly({"dry_run": False, "now": "9999-12-30T00:00:00+00:00"})
    after = SqliteStore(db)
    try:
        assert after.count() == count
    finally:
        after.close()
    assert not (home / "receipts").exists() or not list((home / "receipts").rglob("manifest.json"))
    dry = nightly({"dry_run": True, "now": "9999-12-30T00:00:00+00:00"})  # a dry run may
    assert dry["cutoff"].startswith("9999-12-30")
    # the flow pins its cutoff with operator_config: the schedule when `now` is absent
    from memlife.run_types import RunConfig, operator_config

    at = datetime(2026, 11, 2, 2, 15, tzinfo=UTC)
    assert operator_config(RunConfig(), at).now == at
    assert operator_config(RunConfig(now=ANCHOR), at).now == ANCHOR
    far = RunConfig(dry_run=False, now=datetime(9999, 12, 30, tzinfo=UTC))
    with pytest.raises(Exception, match="more than 48 h ahead"):
        operator_config(far)
    assert operator_config(far.model_copy(update={"allow_future_cutoff": True})) is not None
