"""One policy per version (session 29 compliance review): a copy of the default policy that
kept its `version` and set every TTL to one day deleted 1,423 records whose receipts named
the shipped default's version, and the rules applied were kept nowhere. The first run that
changes records under a version keeps its text beside the receipts; a later run under
that version with other rules is refused before it writes anything."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from memlife.cli import app
from memlife.policy_record import policy_key
from memlife.stores.sqlite import SqliteStore
from tests.support.records import good

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]
DEFAULT = REPO / "policies" / "default.yaml"


def _seed(tmp_path: Path) -> None:
    src = tmp_path / "r.jsonl"
    rows = [good(f"m-{i}", content=f"Likes drink number {i}.", subject=f"s{i}") for i in range(5)]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert runner.invoke(app, ["import", str(src)]).exit_code == 0


def _edited(tmp_path: Path, name: str, version: str | None = None, ttl_days: int = 1) -> Path:
    text = re.sub(r"default_ttl_days: \d+", f"default_ttl_days: {ttl_days}", DEFAULT.read_text())
    if version is not None:
        text, n = re.subn(r"(?m)^version: .*$", f'version: "{version}"', text, count=1)
        assert n == 1
    path = tmp_path / name
    path.write_text(text)
    return path


def _runs(home: Path) -> int:
    return len(list((home / "receipts").rglob("manifest.json")))


def test_a_policy_changed_under_its_version_is_refused(
    home: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _seed(tmp_path)
    version = yaml.safe_load(DEFAULT.read_text())["version"]
    res = runner.invoke(app, ["run", "--engine", "local"])
    assert res.exit_code == 0, res.output
    kept = home / "receipts" / policy_key(version)
    assert kept.read_bytes() == DEFAULT.read_bytes()  # the rules behind the receipts
    runs = _runs(home)

    typo = _edited(tmp_path, "typo.yaml")
    for args in (["run", "--engine", "local", "--policy", str(typo)],
                 ["erase", "--actor", "u-1", "--id", "m-1", "--policy", str(typo), "--yes"]):  # fmt: skip
        res = runner.invoke(app, args)
        assert res.exit_code == 2, (args, res.output)
        assert f"policy version {version!r} names other rules" in res.output
    assert _runs(home) == runs  # nothing started
    # a look-alike version is the same version (session 29 review)
    for lookalike in (version.upper(), version + " ", version + "\u200b"):
        res = runner.invoke(app, ["run", "--engine", "local", "--policy",
                                  str(_edited(tmp_path, "alike.yaml", version=lookalike))])  # fmt: skip
        assert res.exit_code == 2 and "names other rules" in res.output, lookalike
    # a dry run previews the edited policy: it changes nothing, and is not refused
    res = runner.invoke(app, ["run", "--engine", "local", "--dry-run", "--policy", str(typo)])
    assert res.exit_code == 0, res.output
    assert "an apply run under it would be refused" in caplog.text  # and says what is ahead
    with SqliteStore(home / "memlife.db") as store:
        assert all(store.get(f"m-{i}") is not None for i in range(5))
    assert kept.read_bytes() == DEFAULT.read_bytes()


def test_the_same_rules_written_otherwise_and_a_new_version_pass(
    home: Path, tmp_path: Path
) -> None:
    _seed(tmp_path)
    assert runner.invoke(app, ["run", "--engine", "local"]).exit_code == 0
    commented = tmp_path / "commented.yaml"
    commented.write_text("# reviewed by legal, 2026-12-04\n" + re.sub(
        r"(?m)^description: .*$", "description: Reviewed by legal.", DEFAULT.read_text()))  # fmt: skip
    res = runner.invoke(app, ["run", "--engine", "local", "--policy", str(commented)])
    assert res.exit_code == 0, res.output  # a comment or a description is no other rule
    bumped = _edited(tmp_path, "bumped.yaml", version="2026.12-short-ttl")
    res = runner.invoke(app, ["run", "--engine", "local", "--dry-run", "--policy", str(bumped)])
    assert res.exit_code == 0, res.output
    assert not (
        home / "receipts" / policy_key("2026.12-short-ttl")
    ).exists()  # a dry run keeps none
    res = runner.invoke(app, ["run", "--engine", "local", "--policy", str(bumped)])
    assert res.exit_code == 0, res.output
    assert (home / "receipts" / policy_key("2026.12-short-ttl")).read_bytes() == bumped.read_bytes()
