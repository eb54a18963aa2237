"""The files an export writes: never the store it reads, never one file for two outputs,
each written beside its place and moved there only once every one is complete.

``export --output store.db`` truncated the SQLite file under the open connection (every
record gone, held ones included), and ``-o F --erasures F`` let the two handles overwrite
each other with exit 0 (the erasures lost: an import from F accepts erased text again).
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import IO

_SQLITE_FILES = ("", "-wal", "-shm", "-journal")


def _same(a: Path, b: Path) -> bool:
    if a.resolve() == b.resolve():
        return True
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)  # a hard link
    except OSError:
        return False


def export_targets_problem(store: object, **targets: Path | None) -> str | None:
    """Why these output files (``--flag name`` -> path) cannot be written, or None."""
    named = {f"--{flag}": path for flag, path in targets.items() if path is not None}
    own = getattr(store, "path", None)
    for flag, path in named.items():
        if own is not None and any(_same(path, Path(f"{own}{end}")) for end in _SQLITE_FILES):
            return f"{flag} {path} is the store's own file: an export never writes over it"
    flags = list(named)
    for i, first in enumerate(flags):
        for second in flags[i + 1 :]:
            if _same(named[first], named[second]):
                return (
                    f"{first} and {second} name one file ({named[first]}): each output "
                    "needs its own"
                )
    return None


class Staged:
    """Outputs written to hidden files beside their places, moved there by ``commit``."""

    def __init__(self) -> None:
        self._files: dict[Path, Path] = {}  # place -> its temporary file
        self._open: list[IO[str]] = []

    def path(self, place: Path) -> Path:
        tmp = place.with_name(f".{place.name}.{uuid.uuid4().hex[:8]}.tmp")
        self._files[place] = tmp
        return tmp

    def open(self, place: Path) -> IO[str]:
        f = self.path(place).open("w", encoding="utf-8")
        self._open.append(f)
        return f

    def commit(self) -> None:
        for f in self._open:
            f.close()
        for place, tmp in self._files.items():
            os.replace(tmp, place)
        self._files.clear()

    def discard(self) -> None:
        """What ``commit`` did not move (a failure part way) is removed."""
        for f in self._open:
            f.close()
        for tmp in self._files.values():
            tmp.unlink(missing_ok=True)
        self._files.clear()
