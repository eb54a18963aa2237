"""Audit 49e (session 49: scoring, policy and the plan): YAML scalars in a policy file.

(1) An explicit tag on text that is not of its type (``!!int 9O``, ``!!float 0,5``,
``!!bool maybe``, ``!!float ''``, ``!!timestamp 2026-13-45``) escaped ``parse_policy`` as
PyYAML's bare ValueError / KeyError / IndexError: a traceback from ``load_policy`` (the
flow, the library), and on the CLI one line, "invalid literal for int() with base 10:
'9O'", naming neither the file nor the line.
(2) YAML 1.1 reads a float with a colon in base 60: ``1:30.0`` days was 90.0 days. Audit
44f refused ``1:30`` as an int; the float form was still read silently.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memlife.policy import Policy, PolicyError, parse_policy

BASE = (Path(__file__).resolve().parents[2] / "policies" / "default.yaml").read_text()
LINE = BASE[: BASE.index("pending_delete_grace_days: 7")].count("\n") + 1


def _parse(written: str) -> Policy:
    text = BASE.replace("pending_delete_grace_days: 7", f"pending_delete_grace_days: {written}")
    return parse_policy(text.encode(), Path("ops.yaml"))


@pytest.mark.parametrize(
    "written", ["!!int 9O", "!!float 0,5", "!!bool maybe", "!!float ''", "!!int 0o79",
                "!!timestamp 2026-13-45"],
)  # fmt: skip
def test_an_explicit_tag_on_text_not_of_its_type_is_a_policy_error_naming_the_line(
    written: str,
) -> None:
    with pytest.raises(PolicyError) as err:
        _parse(written)
    assert "ops.yaml" in str(err.value) and f"line {LINE}," in str(err.value)


@pytest.mark.parametrize("written", ["1:30.0", "0:7.5", "-1:30.0"])
def test_a_base_60_float_is_refused_not_read_in_minutes(written: str) -> None:
    with pytest.raises(PolicyError, match=r"base 60"):
        _parse(written)


@pytest.mark.parametrize(
    ("written", "days"), [("!!float 7", 7.0), ("!!int 7", 7), ("7.5", 7.5), ("1_0.5", 10.5)]
)
def test_control_tagged_and_decimal_numbers_are_read_as_written(written: str, days: float) -> None:
    policy = _parse(written)
    assert policy.pending_delete_grace_days == days
