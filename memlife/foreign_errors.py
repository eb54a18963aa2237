"""A boundary for the work Prefect runs: an exception that is not memlife's own is raised
again without its message.

A library builds its message from the data it was handed: pydantic quotes the input, a
YAML parser the line, a driver the row, an API the body it answered. Prefect keeps a
failed task's and flow's message and traceback in its state, its logs and its UI, where
memory content must never go. memlife's own errors (``MemlifeError``) are written
content-free and pass unchanged, as do Prefect's own signals (cancellation, timeouts) and
a plain ``TimeoutError``. What is kept of a foreign one: its type, where it was raised
(file, line, function: code, not data) and whether it was throttling (the retry
condition reads that).
"""

from __future__ import annotations

import functools
import traceback
from collections.abc import Callable
from pathlib import PurePath
from typing import Any, TypeVar

from memlife.errors import MemlifeError, Reason

F = TypeVar("F", bound=Callable[..., Any])
FRAMES = 3  # the innermost frames named in the message


class ForeignError(MemlifeError, RuntimeError):
    """An exception from outside memlife, its message withheld. ``code``: THROTTLED when it
    was rate limiting (so the batch is retried), else its type's name."""

    def __init__(self, exc: BaseException):
        from memlife.throttling import is_throttling

        self.kind = f"{type(exc).__module__}.{type(exc).__qualname__}"
        code = Reason.THROTTLED if is_throttling(exc) else type(exc).__name__
        super().__init__(
            f"{self.kind} (its message is withheld: it may quote memory content), "
            f"raised at {raised_at(exc)}",
            code,
        )


def raised_at(exc: BaseException) -> str:
    """The innermost frames of ``exc``'s traceback as ``file:line in function``."""
    frames = traceback.extract_tb(exc.__traceback__)[-FRAMES:]
    return (
        " < ".join(f"{PurePath(f.filename).name}:{f.lineno} in {f.name}" for f in reversed(frames))
        or "?"
    )


def passes(exc: BaseException) -> bool:
    """memlife's own errors, Prefect's signals and timeouts go through unchanged."""
    return (
        isinstance(exc, (MemlifeError, TimeoutError))
        or type(exc).__module__.partition(".")[0] == "prefect"
    )


def content_free(fn: F) -> F:
    """``fn``, with a foreign exception raised again as :class:`ForeignError` (no cause and
    no context attached: a chained exception would print its message beside it, and a tool
    that walks ``__context__`` would find it)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            if passes(exc):
                raise
            err = ForeignError(exc)
        raise err  # outside the handler: not even a suppressed ``__context__`` to walk

    return wrapper  # type: ignore[return-value]  # functools.wraps keeps fn's signature; mypy sees (*args, **kwargs)
