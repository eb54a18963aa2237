"""Audit 49iv (session 49): flow parameters that name files.

``attempt`` is a RunConfig field (so a form field of the nightly deployment) meant to be set
by ``start_run`` and inherited by child runs; the shard flow's ``part`` is the parent's
batch number. Both were joined onto paths unchecked: a manual trigger with an absolute
``attempt`` (or ``../``) wrote the run's report, its attempt marker and its sealing key
outside MEMLIFE_HOME, and the parent's merge of child parts removed ``<attempt>/parts``,
wherever that was. Real components: the Prefect test harness, the SQLite store.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memlife.demo import generate
from memlife.run_types import RunConfig
from memlife.stores import open_store
from tests.e2e.test_fanout import CUTOFF


@pytest.fixture()
def seeded(home: Path) -> str:
    url = f"sqlite:///{home / 'memlife.db'}"
    home.mkdir(parents=True, exist_ok=True)
    db = open_store(url)
    try:
        db.put_many(list(generate(40, seed=7)))
    finally:
        db.close()
    return url


def test_an_attempt_that_is_a_path_is_refused_and_touches_nothing_there(
    prefect_harness: None, seeded: str, tmp_path: Path
) -> None:
    """Adversary: a manual trigger copies a config with ``attempt`` set to a folder of the
    operator's (or types one in the form). Must hold: the parameter is refused (it is a
    name, not a path) and nothing under that folder is written or removed."""
    from flows.nightly import nightly

    elsewhere = tmp_path / "project"
    kept = elsewhere / "parts" / "notes" / "todo.txt"
    kept.parent.mkdir(parents=True)
    kept.write_text("mine")
    try:
        nightly({"dry_run": True, "now": CUTOFF.isoformat(), "store": seeded,
                 "attempt": str(elsewhere)})  # fmt: skip
    except Exception:  # noqa: BLE001 - refused: what matters is the folder below
        pass
    assert kept.read_text() == "mine"
    assert sorted(p.name for p in elsewhere.iterdir()) == ["parts"]


@pytest.mark.parametrize("name", ["../../escaped", "/tmp/escaped", "a/b", ".."])
def test_attempt_and_part_must_be_plain_names(name: str) -> None:
    """Both are refused with the field named, before any run starts."""
    from memlife.run_types import check_name

    with pytest.raises(ValueError, match="attempt"):
        RunConfig(attempt=name)
    with pytest.raises(ValueError, match="part"):
        check_name(name, "part")


def test_control_the_names_runs_make_are_accepted(home: Path) -> None:
    """Control: start_run's own attempt and a child's config round trip unchanged."""
    from memlife import fanout
    from memlife.run_start import start_run

    parent = start_run(RunConfig(dry_run=True, now=CUTOFF))
    params = fanout.config_params(parent.config, parent)
    assert fanout.config_from_params(params).attempt == parent.config.attempt
    assert parent.report_dir.parent.parent == home / "reports"
