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


_phase_hook: Callable[[str, int | None], None] | None = None


def set_phase_hook(hook: Callable[[str, int | None], None] | None) -> None:
    global _phase_hook
    _phase_hook = hook


def phase(label: str, total: int | None = None) -> None:
    """A new stage of the run: the bar shows ``label`` and counts to ``total`` (None: unknown)."""
    if _phase_hook is not None:
        _phase_hook(label, total)
