"""Argument checks of the online library (remember, recall, set_status, forget, get).

Each check returns the value as the library uses it, or raises an :class:`InputError`
naming the argument as the caller wrote it (``at``, not the record field it becomes), so
a bad call is refused before anything is read or written. Messages name the argument and
the type or value expected, never a memory's content.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from enum import Enum
from typing import Any, TypeVar, overload

from memlife.errors import InputError, NamespaceError
from memlife.model import FUTURE_SKEW, MemoryRecord, utcnow
from memlife.namespaces import (
    GLOB_CHARS,
    namespace_problem,
    new_namespace_problem,
    stored_namespace_problem,
)
from memlife.text import invisible, invisible_at

E = TypeVar("E", bound=Enum)


def _record_max_length(field: str) -> int:
    """The record's own bound on ``field`` (``MemoryRecord``'s ``max_length``): an argument
    longer than that names nothing a record can hold."""
    for rule in MemoryRecord.model_fields[field].metadata:  # pydantic's MaxLen(n)
        limit = getattr(rule, "max_length", None)
        if isinstance(limit, int):
            return limit
    raise LookupError(f"MemoryRecord.{field} has no max_length")


ACTOR_MAX_CHARS = _record_max_length("actor_id")  # 256
NAMESPACE_MAX_CHARS = _record_max_length("namespace")  # 1024
ID_MAX_CHARS = _record_max_length("id")  # 256
# subject and owner: the record and the importer bound them only by the import's 1 MiB
# line. Both are keys, not text: a subject is what records are grouped, held and erased by
# ("beverage"), an owner the team answerable ("team-personalization"); so they get the
# record's bound on its other keys (id, actor_id: 256 characters), which is also the most
# an AgentCore metadata value holds as itself (longer, only a digest is filterable).
LABEL_MAX_CHARS = 256
# The earliest ``at`` remember takes. No agent's memory was stated before the Unix epoch:
# an earlier time is a sentinel (datetime.min) or a misparse. An episodic record dated
# then is past its TTL at once (stored, reported created, never recalled), and AgentCore's
# fixed-width timestamps have no year under 1000 (written, such a record cannot be read).
AT_EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)


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


def bounded(text: str, what: str, limit: int) -> str:
    """``text`` when it is at most ``limit`` characters; else an InputError naming ``what``
    and its length, never quoting it (a 10 MB argument must not become a 10 MB message)."""
    if len(text) > limit:
        raise InputError(f"{what} is {len(text)} characters, over the limit of {limit}")
    return text


def actor_arg(actor: object) -> str:
    """An actor id as written, or an InputError naming ``actor`` (never quoting it). Refused,
    never normalised (an erasure of "u1" must find every memory of u1, and only those): one
    with leading or trailing whitespace, a '/' (a namespace built from it, /users/a/b/facts,
    would read as actor a's), a control, format (zero-width), line-separator or other
    default-ignorable character, or one Unicode NFKC writes otherwise (fullwidth 'ｕ1' is
    another actor than 'u1' that looks the same). As subject and owner, it is a key."""
    text: str = text_arg(actor, "actor")
    if not text.strip():
        raise InputError("actor is blank")
    bounded(text, "actor", ACTOR_MAX_CHARS)
    if text != text.strip():
        raise InputError("actor has leading or trailing whitespace")
    if "/" in text:
        i = text.index("/")
        raise InputError(f"actor has a '/' at character {i} (namespaces are built from it)")
    at = invisible_at(text)  # the importer's rule for ids and actors too (model.parse_record)
    if at is not None:
        raise InputError(
            f"actor has an invisible character (U+{ord(text[at]):04X}) at character {at}"
        )
    if unicodedata.normalize("NFKC", text) != text:
        raise InputError("actor is not in Unicode NFKC form: it would look like another actor")
    return text


def namespace_arg(namespace: object) -> str:
    """A namespace a record can have (text, at most the record's length; no '.', '..' or
    empty segments, and no glob character: it would read as a pattern where a policy or a
    selector meets it). The length first: the segment check quotes the namespace."""
    text: str = text_arg(namespace, "namespace")
    problem = new_namespace_problem(bounded(text, "namespace", NAMESPACE_MAX_CHARS))
    if problem:
        raise NamespaceError(f"namespace {text!r} {problem}")
    return text


def namespace_filter_arg(namespace: object, stored: Callable[[], Iterable[str]]) -> str:
    """A namespace a read is filtered by (recall's ``namespace``): one a new record can have
    (:func:`namespace_arg`), or one written before the leading '/' was required, spelled
    exactly as stored (``notes``), as is one with a glob character (refused for new records; a glob
    here would search nothing): such records stay readable, so a read can name them.
    ``stored`` gives the namespaces the reader's records have; it is asked only for an
    unrooted one. Exact, as every namespace key is (shards, ledger, policy globs):
    ``/notes`` is another namespace than ``notes`` and never reaches it."""
    text: str = text_arg(namespace, "namespace")
    bounded(text, "namespace", NAMESPACE_MAX_CHARS)  # first: the messages below quote it
    problem = namespace_problem(text)
    if problem is None and any(ch in text for ch in GLOB_CHARS):  # only one stored so
        problem = "has a glob character: recall takes one namespace (or all), not a glob"
        if text in stored():
            return text
    elif problem is not None and stored_namespace_problem(text) is None:  # only the '/' missing
        if text in stored():
            return text
        problem += ", or name one stored without it"
    if problem:
        raise NamespaceError(f"namespace {text!r} {problem}")
    return text


def record_id_arg(value: object, what: str, *, optional: bool = False) -> Any:
    """A record id (text, at most the record's ``id`` length; None where ``optional``): the
    one check of every id the online library is given (get, forget, set_status, replaced_by),
    before any store is asked."""
    text = text_arg(value, what, optional=optional)
    return None if text is None else bounded(text, what, ID_MAX_CHARS)


def label_arg(value: object, what: str) -> str | None:
    """``subject`` or ``owner``: text of at most LABEL_MAX_CHARS characters, kept as written;
    None, or one with no character anyone can see, is None. The nightly run reads a blank
    subject as none (it infers one) and a blank owner as missing (review); a zero-width or
    other invisible one it would keep as a real key nobody can read, or as an owner."""
    text = text_arg(value, what, optional=True)
    if text is None:
        return None
    bounded(text, what, LABEL_MAX_CHARS)  # first: a 10 MB run of spaces is refused, not None
    return text if any(not invisible(ch) for ch in text) else None


def at_arg(at: object) -> datetime | None:
    """``at`` as an aware UTC datetime (None stays None: now). A naive time is refused, not
    guessed into a zone: stored, it could not be compared with any other time.

    Also refused: a time more than ``FUTURE_SKEW`` (5 minutes) past this clock, the margin
    past which the importer reports a created_at (FUTURE_CREATED_AT) and consolidation
    never lets it win. The importer takes such a record and says so; remember has no report
    to say it in, and its ``at`` becomes created_at, last_verified_at and, on a duplicate,
    the existing record's last_accessed_at: a year-9999 access reads as fresh for ever.
    And a time before AT_EARLIEST (the Unix epoch)."""
    if at is None:
        return None
    if not isinstance(at, datetime):
        raise InputError(f"at must be a datetime with a time zone, not {type(at).__name__}")
    if at.tzinfo is None or at.utcoffset() is None:
        raise InputError("at must be a datetime with a time zone (e.g. tzinfo=UTC), not naive")
    try:
        when = at.astimezone(UTC)
    except OverflowError:
        raise InputError("at is out of range once converted to UTC") from None
    latest = utcnow() + FUTURE_SKEW
    if when > latest:
        raise InputError(
            f"at {when.isoformat()} is in the future: at most {FUTURE_SKEW} past this "
            f"clock ({latest.isoformat()}) is taken"
        )
    if when < AT_EARLIEST:
        raise InputError(f"at {when.isoformat()} is before {AT_EARLIEST.isoformat()}")
    return when


SHOWN_MAX_CHARS = 64  # a refused option's value longer than this is shown by its length


def shown(value: object) -> str:
    """A refused argument as a message shows it: a number, or a text of at most
    ``SHOWN_MAX_CHARS`` (a mistyped ``source``), as written; a longer text or a number of
    more digits only by its size, anything else by its type. A 10 MB argument must not
    become a 10 MB message (README, "As a library"), and ``repr`` of an int past Python's
    4,300 digits raises instead of refusing."""
    if isinstance(value, bool | float) or (
        isinstance(value, int) and abs(value) < 10**SHOWN_MAX_CHARS
    ):
        return repr(value)
    if isinstance(value, int):
        return f"an int of {value.bit_length()} bits"
    if isinstance(value, str):
        return repr(value) if len(value) <= SHOWN_MAX_CHARS else f"a str of {len(value)} characters"
    return type(value).__name__


def choice_arg(cls: type[E], value: object, what: str) -> E:
    """``value`` as a member of ``cls`` (the member itself or its value); else an InputError
    naming ``what`` and listing the values allowed."""
    if isinstance(value, cls):
        return value
    try:
        return cls(value)
    except (ValueError, TypeError):
        allowed = ", ".join(str(m.value) for m in cls)
        raise InputError(f"{what} must be one of {allowed}; not {shown(value)}") from None


def ids_arg(value: object, what: str) -> list[str]:
    """Record ids: one id as text, or a list (any iterable but a mapping) of ids as text,
    each checked by :func:`record_id_arg` (one over the bound refuses the call). Each id
    once, in the order first given: a call changes and returns an id once."""
    if isinstance(value, str):
        return [record_id_arg(value, what)]
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
        record_id_arg(rid, what)
    return list(dict.fromkeys(out))


def cosine_arg(value: object, what: str) -> float:
    """A cosine bound (``threshold``, ``near_duplicate``): a real number from -1 to 1."""
    if isinstance(value, int | float) and not isinstance(value, bool) and -1 <= value <= 1:
        return float(value)
    raise InputError(f"{what} must be a cosine from -1 to 1, not {shown(value)}")


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
