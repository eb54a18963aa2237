"""Audit 49m3 (session 49, mutation pass): the shard batch's ``part`` (audit 49iv) is checked
where it is joined onto the report folder, ``pipeline.process_isolated``: session 49's tests
checked ``check_name`` alone, so the call could go and leave a part of "../x" writing a
report part outside the run's folder (and the merge's removal of ``parts`` with it)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from memlife.errors import InputError
from memlife.pipeline import RunConfig, process_isolated

NOW = datetime(2024, 1, 14, tzinfo=UTC)


@pytest.mark.parametrize("part", ["../x", "/tmp/x", ".."])
def test_an_isolated_batch_refuses_a_part_that_is_a_path(home: Path, part: str) -> None:
    with pytest.raises(InputError, match="part"):
        process_isolated(RunConfig(dry_run=True, now=NOW), [], part)
    assert not (home / "x").exists()
