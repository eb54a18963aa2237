"""Namespace paths: validation and segment-aware globs.

A namespace is a `/`-separated path from the root (``/users/u-1/facts``): it starts with
``/``, as every policy glob must (``users/u-1/facts`` was accepted once, and no
``enforce_deletion_in`` glob could ever match it: its expired records were never deleted).
Segments are never empty,
``.`` or ``..``: such a path would name one place and look like another, and a glob
written for one tree could then reach into a second one. In a glob, ``*`` (and ``?``,
``[...]``) match inside ONE segment, ``**`` matches any number of whole segments (zero
included): ``/users/*/facts`` never matches ``/users/u1/../../compliance/facts``.
"""

from __future__ import annotations

import re
import unicodedata
from fnmatch import fnmatchcase
from functools import cache, lru_cache

from memlife.errors import NamespaceError as NamespaceError  # moved; re-exported

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")  # one scan in C, not a generator a character


def _segments(path: str) -> list[str]:
    return (path[1:] if path.startswith("/") else path).split("/")


def namespace_problem(namespace: str) -> str | None:
    """Why this namespace is refused for a new record (import, ``remember``, recall, the
    MEMLIFE_NAMESPACE template), or None when it is fine."""
    problem = stored_namespace_problem(namespace)
    if problem is None and not namespace.startswith("/"):
        return "must start with '/' (as every policy glob does)"
    return problem


GLOB_CHARS = "*?["  # fnmatch's pattern characters: every namespace selector reads them


def new_namespace_problem(namespace: str) -> str | None:
    """:func:`namespace_problem` for a new record's namespace (import, ``remember``): no
    glob character either. Every selector (``run --namespace``, ``review list``, policy
    globs) reads one as a pattern: ``/users/u?/facts`` would select u1's records, and
    ``/users/[u]1/facts`` not its own."""
    problem = namespace_problem(namespace)
    if problem is None and any(ch in namespace for ch in GLOB_CHARS):
        return "has a glob character ('*', '?' or '['): a namespace is one path, not a glob"
    return problem or _lookalike(namespace)


def _lookalike(namespace: str) -> str | None:
    """Why a new namespace would print as another one, as ids and actors are refused
    (model.parse_record): "/users/u1/sant\u00e9" and its decomposed form, or one with a
    zero-width space, are two namespaces no reader tells apart; a policy glob, ``run
    --namespace`` or recall's filter written as it prints reaches only one (audit 50b)."""
    if namespace.isascii() and namespace.isprintable():
        return None  # the common case: one scan in C
    from memlife.text import invisible_at

    at = invisible_at(namespace)
    if at is not None:  # the namespace itself is not echoed: the caller quotes it
        return f"has an invisible character (U+{ord(namespace[at]):04X}) at character {at}"
    if not unicodedata.is_normalized("NFC", namespace):
        return "is not in Unicode normal form NFC (it would print as another namespace)"
    return None


def stored_namespace_problem(namespace: str) -> str | None:
    """:func:`namespace_problem` without the leading '/': what a record already stored may
    have. Rows written before the rule stay readable (a record read, rebuilt by an erasure
    or merged by a nightly run keeps its namespace); the nightly run names each such
    namespace instead (``Policy.deletion_enforced``: no glob can match it)."""
    if not namespace or not namespace.strip():
        return "must not be blank"
    if _CONTROL.search(namespace):
        return "contains a control character"
    for seg in _segments(namespace):
        if seg == "":
            return "has an empty segment ('//' or a trailing '/')"
        if seg in (".", ".."):
            return f"has a '{seg}' segment"
    return None


def check_namespace(namespace: str) -> str:
    problem = namespace_problem(namespace)
    if problem:
        raise NamespaceError(f"namespace {namespace!r} {problem}")
    return namespace


# pure; asked per shard (owners) and per staged group's namespace with a few patterns, in
# shard order: one miss per namespace and pattern, then hits. Bounded (~2 MB).
@lru_cache(maxsize=1 << 14)
def glob_match(pattern: str, namespace: str) -> bool:
    """True when ``namespace`` matches ``pattern`` segment by segment (see module doc)."""
    if stored_namespace_problem(namespace) is not None:
        return False  # a malformed path is never inside an enforced tree by accident
    if pattern.startswith("/") != namespace.startswith("/"):
        return False
    return _match(tuple(_segments(pattern)), tuple(_segments(namespace)))


def _match(pat: tuple[str, ...], segs: tuple[str, ...]) -> bool:
    """Pattern segments from ``i`` against namespace segments from ``j``, each pair judged
    once (repeated ``**`` tried every split: exponential in them, audit 47l)."""

    @cache
    def m(i: int, j: int) -> bool:
        if i == len(pat):
            return j == len(segs)
        if pat[i] == "**":
            return any(m(i + 1, k) for k in range(j, len(segs) + 1))
        return j < len(segs) and fnmatchcase(segs[j], pat[i]) and m(i + 1, j + 1)

    return m(0, 0)


def glob_covers(wide: str, narrow: str) -> bool:
    """True when every namespace ``narrow`` matches, ``wide`` matches too (a later policy
    rule under an earlier one that always wins). Sure answers only: a segment pattern other
    than ``*`` covers only itself or a plain name it matches, so False may mean "cannot
    tell", never a rule wrongly called dead."""
    if wide.startswith("/") != narrow.startswith("/"):
        return False
    return _covers(tuple(_segments(wide)), tuple(_segments(narrow)))


def _covers(wide: tuple[str, ...], narrow: tuple[str, ...]) -> bool:
    """``glob_covers`` on segments, each (wide from ``i``, narrow from ``j``) judged once."""

    @cache
    def c(i: int, j: int) -> bool:
        if i == len(wide):
            return j == len(narrow)
        head = wide[i]
        if head == "**":
            return c(i + 1, j) or (j < len(narrow) and c(i, j + 1))
        if j == len(narrow) or narrow[j] == "**":
            return False
        seg = narrow[j]
        plain = not any(ch in seg for ch in "*?[")
        return (head in ("*", seg) or (plain and fnmatchcase(seg, head))) and c(i + 1, j + 1)

    return c(0, 0)
