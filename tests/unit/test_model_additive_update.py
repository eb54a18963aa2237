"""An "update" that retires a fact the newer record only adds to (audit 43n).

"Allergic to peanuts." then "Additionally allergic to shellfish.": the newer record adds
a second allergy. A confused model answers ``update`` with the peanut record outdated;
grounding's additive guard (``text.reads_additive``) refuses that for "also", "too", "as
well", "in addition", but not for "additionally" or "plus", so the peanut allergy would
be superseded by a replacement that says only shellfish. Real MiniLM, real grounding.
"""

from __future__ import annotations

import pytest

from tests.unit.test_consolidation_adversarial import code, emb, group, result  # noqa: F401


@pytest.mark.parametrize("newer", ["Additionally allergic to shellfish.",
                                   "Plus allergic to shellfish."])  # fmt: skip
def test_an_additive_newer_record_retires_nothing(emb, newer: str) -> None:  # noqa: F811
    """The model names the older allergy outdated: refused, as it is for "Also allergic ..."."""
    for text in ("Also allergic to shellfish.", newer):
        update = result(text, ids=("s-1",), relation="update", outdated_ids=["s-0"])
        refused = code(update, group("Allergic to peanuts.", text), emb)
        assert refused == "ADDITIVE_NOT_UPDATE", text
