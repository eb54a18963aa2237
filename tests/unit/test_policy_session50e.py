"""Audit 50e (session 50): a policy's ``version`` as a careless operator writes it.

The version is what every manifest, receipt and changed record names as the rules applied,
and it names the file the rules are kept in (``policies/{version}.yaml``, policy_record).
Each test edits a copy of the shipped default and runs the real loader or the real CLI.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memlife.policy import PolicyError, load_policy, policy_key
from tests.support.cli import invoke

REPO = Path(__file__).resolve().parents[2]
DEFAULT = REPO / "policies" / "default.yaml"


def _with_version(tmp_path: Path, version: str) -> Path:
    text = re.sub(
        r"(?m)^version: .*$", lambda _: f'version: "{version}"', DEFAULT.read_text(), count=1
    )
    path = tmp_path / "p.yaml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("version", [" ", "\\t", "\\u200b", " \\u2060 "])
def test_a_blank_policy_version_is_refused(tmp_path: Path, version: str) -> None:
    """Adversary: an edited copy whose ``version`` is spaces, a tab or an invisible
    character (a template left empty, a paste). ``min_length=1`` lets it through: every
    receipt then names a version nobody can read, and every such policy, whatever its rules,
    is kept under one file, ``policies/.yaml``. Must hold: refused naming the key."""
    path = _with_version(tmp_path, version)
    with pytest.raises(PolicyError, match="key 'version'"):
        load_policy(path)


def test_a_run_under_a_blank_version_is_refused_before_it_starts(
    home: Path, tmp_path: Path
) -> None:
    """The same through `memlife run --dry-run`: exit 2 (an invalid policy), not a run."""
    from memlife.stores.sqlite import SqliteStore

    SqliteStore(home / "memlife.db").close()
    code, _, err = invoke("run", "--dry-run", "--policy", str(_with_version(tmp_path, " ")))
    assert code == 2, err
    assert "version" in err


def test_control_versions_the_session_29_rule_folds_are_still_read(tmp_path: Path) -> None:
    """Control: "V1 " is read, and folds with "v1" into one kept file (session 29)."""
    policy = load_policy(_with_version(tmp_path, "V1 "))
    assert policy.version == "V1 "
    assert policy_key(policy.version) == policy_key("v1") == "policies/v1.yaml"
