"""Session 47 (audit 47m): the owner placeholder check of audit 47l (memlife/policy.py
`OwnerRule._one_placeholder`) against typos that leave a brace unmatched."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from memlife.policy import PolicyError, load_policy
from tests.unit.test_policy_session47 import DEFAULT


# fmt: skip
@pytest.mark.parametrize("owner", ["{actor", "actor}", "{actor]", "{{actor}}", "{actor}}"])
def test_an_owner_with_a_brace_left_over_from_a_mistyped_placeholder_is_refused(
    tmp_path: Path, owner: str
) -> None:
    """The operator mistypes `owner: "{actor}"` with a brace missing, a wrong bracket, or
    doubled braces (a template habit). `Policy.owner_for` replaces only an exact `{actor}`,
    so the leftover text ("{actor", "{u-1}") becomes the owner of every ownerless record of
    the glob and no MISSING_OWNER review ever opens: the very harm audit 47l refused for
    `{user}`. Must hold: refused as an invalid policy naming the key."""
    data = yaml.safe_load(DEFAULT.read_text())
    data["owners"] = [{"namespace": "/users/*/**", "owner": owner}]
    path = tmp_path / "owners.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(PolicyError, match=r"key 'owners\.0\.owner'"):
        load_policy(path)
