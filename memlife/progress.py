"""A process-wide progress hook: the CLI installs a bar, the pipeline reports records done.

Kept out of flow parameters (which must serialise) and out of the plain functions'
signatures; with no hook installed, reporting costs one attribute lookup.
"""

from __future__ import annotations

from collections.abc import Callable

_hook: Callable[[int], None] | None = None


def set_hook(hook: Callable[[int], None] | None) -> None:
    global _hook
    _hook = hook


def advance(records: int) -> None:
    if _hook is not None:
        _hook(records)
