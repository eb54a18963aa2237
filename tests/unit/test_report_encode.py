"""The report's hand-made JSONL lines are exactly json.dumps of each decision's row."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from memlife.plan import Action, Decision, Reason
from memlife.report import encode

texts = st.text(min_size=1, max_size=12)  # quotes, backslashes, control and non-ASCII chars
decisions = st.builds(
    Decision,
    id=texts,
    actor_id=st.sampled_from(["u-1", 'u-"2', "ü-3"]),
    namespace=st.sampled_from(["/a", "/users/u-1/x", "/é\\n"]),
    action=st.sampled_from(list(Action)),
    reasons=st.lists(st.sampled_from(list(Reason)), max_size=4),
    score=st.none() | st.floats(min_value=0, max_value=1) | st.sampled_from([1e-7, 0.5, 1 / 3]),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(decisions, max_size=30))
def test_encode_equals_json_dumps_of_each_row(ds: list[Decision]) -> None:
    want = "".join(json.dumps(d.report_row(), separators=(",", ":")) + "\n" for d in ds)
    assert encode(ds) == want
