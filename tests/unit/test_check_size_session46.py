"""Session 46 (audit 46j's survivors): `grounding.check_size` at its exact bounds. The summary,
the claims and the dropped claims, each list taken together, may reach twice their sources'
bytes plus the slack, not a byte more; a text may reach the policy's content bound, not a byte
more. (Kills `>` for `>=` at either bound, the dropped claims left out, the slack or the growth
changed.)"""

from __future__ import annotations

import pytest

from memlife.consolidate import ConsolidationError
from memlife.consolidate.grounding import (
    OVERSIZED_RESULT,
    SUMMARY_GROWTH,
    SUMMARY_SLACK_BYTES,
    check_size,
)
from tests.unit.test_grounding import group
from tests.unit.test_guards_session35g import answer

SOURCE = "Alice is allergic to peanuts and carries an EpiPen to work every day."


def _sized(n: int) -> list[str]:
    """Texts of ``n`` bytes in all, each at most 1,000 bytes (ASCII)."""
    return [("x" * 1000)[: min(1000, n - i)] for i in range(0, n, 1000)]


@pytest.mark.parametrize("field", ["summary", "claims", "dropped_claims"])
def test_each_list_may_reach_its_bound_not_a_byte_more(field: str) -> None:
    g = group(SOURCE, SOURCE)
    bound = SUMMARY_GROWTH * 2 * len(SOURCE.encode()) + SUMMARY_SLACK_BYTES
    for size, refused in ((bound, False), (bound + 1, True)):
        res = answer(g, SOURCE, SOURCE)
        texts = _sized(size)
        if field == "summary":
            res.summary = "x" * size
        else:
            setattr(res, field, texts)
        if refused:
            with pytest.raises(ConsolidationError) as err:
                check_size(res, g, max_bytes=65_536)
            assert err.value.code == OVERSIZED_RESULT and field in str(err.value)
        else:
            check_size(res, g, max_bytes=65_536)


def test_a_text_may_reach_the_content_bound_not_a_byte_more() -> None:
    g = group("x" * 600, "x" * 600)
    res = answer(g, SOURCE, "y" * 500)
    check_size(res, g, max_bytes=500)
    res.claims = ["y" * 501]
    with pytest.raises(ConsolidationError) as err:
        check_size(res, g, max_bytes=500)
    assert err.value.code == OVERSIZED_RESULT
