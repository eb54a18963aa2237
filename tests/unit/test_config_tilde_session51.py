"""A '~' that no shell expands (a systemd unit, a Dockerfile ENV, a quoted export) in the
model cache or the receipts folder: refused naming the setting, as MEMLIFE_HOME is since
audit 48vii, never a folder named '~' under the working directory (session 51; left by audit
50e for the model cache)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlife.audit import receipts_url_problem


def test_a_model_cache_written_with_a_tilde_is_refused_by_its_name(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memlife.errors import SettingsError
    from memlife.settings import settings

    monkeypatch.setenv("MEMLIFE_MODEL_CACHE", "~/.cache/memlife")
    with pytest.raises(SettingsError, match="MEMLIFE_MODEL_CACHE"):
        settings()


def test_control_a_full_model_cache_path_is_read(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memlife.settings import settings

    monkeypatch.setenv("MEMLIFE_MODEL_CACHE", "/var/cache/memlife~old")
    assert settings().model_cache == Path("/var/cache/memlife~old")


def test_receipts_in_a_folder_written_with_a_tilde_are_refused(
    home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Adversary: MEMLIFE_RECEIPTS=file://~/receipts. Before, the night wrote its receipts to
    ``./~/receipts`` wherever the worker ran: evidence no reviewer looks for."""
    from tests.support.cli import invoke

    work = tmp_path / "work"
    work.mkdir()
    assert invoke("remember", "--actor", "u-1", "Likes tea.")[0] == 0
    monkeypatch.chdir(work)
    monkeypatch.setenv("MEMLIFE_RECEIPTS", "file://~/receipts")
    assert receipts_url_problem("file://~/receipts") is not None
    code, _, err = invoke("run", "--engine", "local")
    assert code != 0 and "file://~/receipts" in err, err
    assert not (work / "~").exists()


def test_control_receipts_in_relative_and_absolute_folders_are_accepted(tmp_path: Path) -> None:
    assert receipts_url_problem("file://receipts") is None
    assert receipts_url_problem(f"file://{tmp_path}/r~1") is None
