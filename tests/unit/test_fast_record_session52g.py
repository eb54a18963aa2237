"""Audit 52g: the import's fast path (``fast_record``, ``fast_row``) against the checked path
(``model.parse_record_line``, the pydantic model), differentially, on records as careless
or hostile writers spell them: odd types, extra keys, NaN and infinities, huge integers,
bools where numbers go, times with offsets, without a zone, with 'Z', lower case, a
space, leap seconds, unicode ids (NFD, fullwidth, right-to-left, zero-width), nested
metadata.

Held on every line: the checked path answers a record or a ``RecordError`` (nothing else
escapes); a line the fast path takes is the checked path's record and row, exactly; the
two fast functions take the same lines; and ``import_lines.line_row`` (what the import
stores) is the checked path's row or its error (same id and field).

What failed: a number past Python's 4,300 digits made the checked path raise a bare
ValueError (``test_import_digits_audit52g.py`` shows what that did to an import).
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memlife.errors import RecordError
from memlife.fast_record import fast_record, fast_row
from memlife.import_lines import line_row
from memlife.model import MemoryRecord, parse_record_line
from memlife.stores.sqlite import record_to_row

HUGE = "9" * (sys.get_int_max_str_digits() + 1)
_HUGE_TOKEN = "@@HUGE@@"  # spliced in after json.dumps, which cannot write such a number

_TIMES = st.sampled_from(
    [
        "2026-01-02T10:00:00Z",
        "2026-01-02T10:00:00z",
        "2026-01-02t10:00:00Z",
        "2026-01-02 10:00:00Z",
        "2026-01-02T10:00:00+00:00",
        "2026-01-02T10:00:00-00:00",
        "2026-01-02T10:00:00+05:30",
        "2026-01-02T10:00:00.5-09:00",
        "2026-01-02T10:00:00,5Z",
        "2026-01-02T10:00:00.1234567Z",
        "2026-01-02T10:00:00+05:30:15",
        "2026-01-02T10:00:00+24:00",
        "2026-01-02T10:00:00",
        "2026-01-02",
        "2016-12-31T23:59:60Z",  # a leap second
        "2016-12-31T24:00:00Z",
        "2026-02-29T10:00:00Z",
        "0001-01-01T00:00:00+01:00",
        "9999-12-31T23:59:59-01:00",
        "2026-W01-1T10:00:00Z",
        "20260102T100000Z",
        "1767348000",
        "",
    ]
)
_IDS = st.sampled_from(
    [
        "m-1", "m-\u00e9", "m-e\u0301", "m-\uff11", "m-\u202e1", "m-\u200b1", "m 1", " m-1",
        "m-1 ", "\u0661", "\U0001f600", "m/1", "m:1", "x" * 256, "x" * 257, "", " ",
    ]
)  # fmt: skip
_ODD = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([2**63 - 1, 2**63, -(2**63), 10**30, _HUGE_TOKEN]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", "1", "0.5", "true", "null", "NaN"]),
    st.lists(st.integers(0, 2), max_size=2),
    st.dictionaries(st.sampled_from(["a", "turn", "speaker"]), st.integers(0, 2), max_size=2),
)
_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "id": st.one_of(_IDS, _ODD),
    "actor_id": st.one_of(_IDS, _ODD),
    "namespace": st.one_of(
        st.sampled_from(["/u/1", "/u/1/", "u/1", "/u/\u00e9", "/u/e\u0301", "/u//1", "/"]), _ODD
    ),
    "memory_type": st.one_of(st.sampled_from(["semantic", "Semantic", "episodic "]), _ODD),
    "content": st.one_of(st.sampled_from(["Likes tea.", " ", "a\x00b", "\u2028"]), _ODD),
    "created_at": st.one_of(_TIMES, _ODD),
    "last_accessed_at": st.one_of(_TIMES, _ODD),
    "expires_at": st.one_of(_TIMES, _ODD),
    "status_changed_at": st.one_of(_TIMES, _ODD),
    "subject": st.one_of(st.sampled_from(["tea", "Caroline", ""]), _ODD),
    "owner": st.one_of(st.sampled_from(["team"]), _ODD),
    "confidence": st.one_of(st.sampled_from([0.0, -0.0, 1.0, 1, 0, 0.5, 1e-400]), _ODD),
    "access_count": st.one_of(st.sampled_from([0, 5, -0]), _ODD),
    "source": st.one_of(st.sampled_from(["user_stated", "agent_inferred", "USER_STATED"]), _ODD),
    "retention_class": st.one_of(st.sampled_from(["standard", "legal_hold"]), _ODD),
    "status": st.one_of(st.sampled_from(["active", "superseded", "retained"]), _ODD),
    "provenance": st.one_of(
        _ODD,
        st.fixed_dictionaries(
            {},
            optional={
                "source_event": st.one_of(st.just("evt-1"), _ODD),
                "replaced_by": st.one_of(st.just("m-2"), _ODD),
                "supersedes": st.one_of(st.lists(st.sampled_from(["m-1", "m-2"])), _ODD),
                "content_sha256": st.one_of(st.just("ab" * 32), _ODD),
                "metadata": _ODD,
            },
        ),
    ),
    "metadata": _ODD,
    "speaker": _ODD,
}
_VALID: dict[str, Any] = {
    "id": "m-1",
    "actor_id": "u-1",
    "namespace": "/u/1",
    "memory_type": "semantic",
    "content": "Likes tea.",
    "created_at": "2026-01-02T10:00:00Z",
}


def _dumps(record: dict[str, Any], ascii_only: bool) -> str:
    text = json.dumps(record, ensure_ascii=ascii_only, allow_nan=True)
    return text.replace(f'"{_HUGE_TOKEN}"', HUGE)


@st.composite
def _lines(draw: st.DrawFn, huge: bool) -> bytes:
    record = dict(_VALID)
    for name in draw(st.lists(st.sampled_from(sorted(_FIELDS)), max_size=5, unique=True)):
        record[name] = draw(_FIELDS[name])
    for name in draw(st.lists(st.sampled_from(sorted(_VALID)), max_size=1, unique=True)):
        record.pop(name, None)
    text = _dumps(record, draw(st.booleans()))
    if not huge and HUGE in text:
        text = text.replace(HUGE, "7")
    return text.encode("utf-8", "surrogatepass")


def _checked(raw: bytes) -> MemoryRecord | RecordError:
    try:
        return parse_record_line(raw.decode("utf-8"), 1)
    except RecordError as exc:  # anything else escapes and fails the test
        return exc


def _same(a: Any, b: Any) -> bool:
    return a == b or (
        isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    )


def _differential(raw: bytes) -> None:
    checked = _checked(raw)
    fast, row = fast_record(raw), fast_row(raw)
    assert (fast is None) == (row is None)
    if fast is not None:
        assert isinstance(checked, MemoryRecord), checked
        assert fast == checked and fast.to_json() == checked.to_json()
        assert fast.model_fields_set == checked.model_fields_set
        assert row == record_to_row(checked) == record_to_row(fast)
    try:
        stored: tuple[Any, ...] | RecordError = line_row(raw, 1, content_max=1 << 20)
    except RecordError as exc:
        stored = exc
    if isinstance(checked, RecordError):
        assert isinstance(stored, RecordError)
        assert (stored.record_id, stored.field) == (checked.record_id, checked.field)
    else:
        assert isinstance(stored, tuple)
        assert all(_same(a, b) for a, b in zip(stored, record_to_row(checked), strict=True))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_lines(huge=True))
@example(_dumps({**_VALID, "access_count": _HUGE_TOKEN}, True).encode())
def test_the_two_paths_agree_on_every_line_huge_integers_included(raw: bytes) -> None:
    _differential(raw)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_lines(huge=False))
def test_control_the_two_paths_agree_on_odd_lines_within_the_digit_limit(raw: bytes) -> None:
    _differential(raw)
