"""Audit 51m (session 51 mutation pass): the '~' refusals (session 51) cover every form a
shell would have expanded, not only '~/'. A '~' alone or '~user/...' (a service account's
home, as a unit file may spell it) is as unexpanded: a mutant refusing only '~/' lived,
and the model or the receipts went to a folder named '~' or '~memlife' under the
working directory."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlife.audit import receipts_url_problem


@pytest.mark.parametrize("value", ["~", "~memlife/.cache/models"])
def test_a_model_cache_starting_with_any_tilde_is_refused(
    home: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    from memlife.errors import SettingsError
    from memlife.settings import settings

    monkeypatch.setenv("MEMLIFE_MODEL_CACHE", value)
    with pytest.raises(SettingsError, match="MEMLIFE_MODEL_CACHE"):
        settings()


@pytest.mark.parametrize("url", ["file://~", "file://~memlife/receipts"])
def test_receipts_in_any_tilde_folder_are_refused(url: str) -> None:
    assert receipts_url_problem(url) is not None
