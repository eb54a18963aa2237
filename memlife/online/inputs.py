"""Argument checks of the online library (remember, recall, set_status, forget, get).

Each check returns the value as the library uses it, or raises an :class:`InputError`
naming the argument as the caller wrote it (``at``, not the record field it becomes), so
a bad call is refused before anything is read or written. Messages name the argument and
the type or value expected, never a memory's content.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from enum import Enum
from typing import Any, TypeVar, overload

from memlife.errors import InputError
from memlife.namespaces import check_namespace

E = TypeVar("E", bound=Enum)


def text_arg(value: object, what: str, *, optional: bool = False) -> Any:
    """``value`` when it is text (or None where ``optional``) and valid Unicode; else an
    InputError naming ``what``."""
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InputError(f"{what} must be text, not {type(value).__name__}")
    return valid_unicode(value, what)


def number_in(value: object, low: float, high: float) -> bool:
    """A real number (not a bool) from ``low`` to ``high``; NaN is not."""
    return isinstance(value, int | float) and not isinstance(value, bool) and low <= value <= high


def actor_arg(actor: object) -> str:
    text: str = text_arg(actor, "actor")
    if not text.strip():
        raise InputError("actor is blank")
    return text


def namespace_arg(namespace: object) -> str:
    """A namespace a record can have (text; no '.', '..' or empty segments)."""
    return check_namespace(text_arg(namespace, "namespace"))


def at_arg(at: object) -> datetime | None:
    """``at`` as an aware UTC datetime (None stays None: now). A naive time is refused, not
    guessed into a zone: stored, it could not be compared with any other time."""
    if at is None:
        return None
    if not isinstance(at, datetime):
        raise InputError(f"at must be a datetime with a time zone, not {type(at).__name__}")
    if at.tzinfo is None or at.utcoffset() is None:
        raise InputError("at must be a datetime with a time zone (e.g. tzinfo=UTC), not naive")
    try:
        return at.astimezone(UTC)
    except OverflowError:
        raise InputError("at is out of range once converted to UTC") from None


def choice_arg(cls: type[E], value: object, what: str) -> E:
    """``value`` as a member of ``cls`` (the member itself or its value); else an InputError
    naming ``what`` and listing the values allowed."""
    if isinstance(value, cls):
        return value
    try:
        return cls(value)
    except (ValueError, TypeError):
        allowed = ", ".join(str(m.value) for m in cls)
        shown = repr(value) if isinstance(value, str) else type(value).__name__
        raise InputError(f"{what} must be one of {allowed}; not {shown}") from None


def ids_arg(value: object, what: str) -> list[str]:
    """Record ids: one id as text, or a list (any iterable but a mapping) of ids as text."""
    if isinstance(value, str):
        return [text_arg(value, what)]
    if (
        value is None
        or isinstance(value, bytes | bytearray | dict)
        or not isinstance(value, Iterable)
    ):
        raise InputError(f"{what} must be a record id or a list of ids, not {type(value).__name__}")
    out = list(value)
    for rid in out:
        if not isinstance(rid, str):
            raise InputError(f"{what} must hold record ids as text, not {type(rid).__name__}")
        valid_unicode(rid, what)
    return out


def valid_unicode(text: str, what: str) -> str:
    """``text`` when it is valid Unicode; a lone surrogate (from a bad decode upstream) is an
    InputError naming where, not a tokenizer's TypeError or a bare UnicodeEncodeError."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(
            f"{what} is not valid Unicode: a lone surrogate at character {exc.start}"
        ) from None
    return text


@overload
def stored_time(value: datetime) -> datetime: ...
@overload
def stored_time(value: None) -> None: ...
def stored_time(value: datetime | None) -> datetime | None:
    """A time as a store returns it, made comparable: a naive one (a duplicate refresh wrote
    the caller's naive ``at`` unchecked before session 26) is read as the UTC it was meant
    as, rather than failing every comparison with an aware time."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)
