"""What a LangGraph item may hold: a key within a record id's bound, a value JSON carries
exactly (anything else would read back as something else, or not at all): refused by name
at a put."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

from memlife.errors import InputError
from memlife.model import LATEST
from memlife.online.inputs import valid_unicode

KEY_MAX_CHARS = 256  # as MemoryRecord.id and actor_id: a key names one item as an id does


def _surrogate(text: str) -> str | None:
    """A lone surrogate (``surrogateescape``) has no UTF-8 form: named, not a codec error."""
    bad = not text.isascii() and any("\ud800" <= ch <= "\udfff" for ch in text)
    return "a string with a lone surrogate (not valid Unicode)" if bad else None


def _int_text_ok(value: int) -> bool:
    """Whether ``str(value)`` works: Python refuses ints past sys.get_int_max_str_digits()
    (4,300 digits by default) before converting, so the check is cheap (audit 52g's class)."""
    try:
        str(value)
    except ValueError:
        return False
    return True


def json_problem(value: Any) -> str | None:
    """What in ``value`` JSON cannot carry exactly (it would read back as something else,
    or not at all), or None: JSON has string keys, lists and finite numbers only."""
    try:
        if isinstance(value, str):
            return _surrogate(value)
        if value is None or isinstance(value, bool):
            return None
        if isinstance(value, int):  # past the digit limit json.dumps raised a bare ValueError
            return None if _int_text_ok(value) else "an integer with too many digits"
        if isinstance(value, float):
            return None if math.isfinite(value) else f"a float {value}"
        if isinstance(value, list):
            return next((p for v in value if (p := json_problem(v))), None)
        if isinstance(value, dict):
            for k, v in value.items():
                if not isinstance(k, str):
                    return f"a {type(k).__name__} dict key"
                if problem := _surrogate(k) or json_problem(v):
                    return problem
            return None
    except RecursionError:
        return "values nested too deeply"
    return f"a {type(value).__name__}"


def check_key(key: object) -> str:
    """``key`` when it is a string of at most :data:`KEY_MAX_CHARS` characters; else an
    InputError naming its type or length (never quoting it)."""
    if not isinstance(key, str):
        raise InputError(f"item key: a {type(key).__name__}; expected a string")
    if len(key) > KEY_MAX_CHARS:
        raise InputError(
            f"item key: {len(key)} characters, over the limit of {KEY_MAX_CHARS} "
            "(the bound of a record id)"
        )
    return valid_unicode(key, "item key")


def no_item_has(key: object) -> bool:
    """Whether no item can have ``key`` (:func:`check_key` refuses it at a put): a get finds
    nothing and a delete deletes nothing, as for any key never put."""
    return not isinstance(key, str) or len(key) > KEY_MAX_CHARS or _surrogate(key) is not None


def ttl_deadline(now: datetime, ttl: object, key: str) -> datetime | None:
    """An item's deadline from a ``PutOp``'s ``ttl`` (minutes; not a number: none). A TTL
    past the calendar is its last instant (as ``model.days_after``), one reaching before it
    a deadline already gone (``now``: as ``ttl=-1``); NaN names no time and is refused. Each
    was a bare OverflowError or ValueError out of the agent's put, naming nothing (audit 53tm)."""
    if not isinstance(ttl, int | float):
        return None
    if isinstance(ttl, float) and math.isnan(ttl):
        raise InputError(f"item {key!r}: ttl is not a number (NaN); give minutes, or None")
    try:
        return now + timedelta(minutes=ttl)
    except OverflowError:
        return LATEST if ttl > 0 else now
