"""The files an export writes: never the store it reads, never one file for two outputs,
each written beside its place and moved there only once every one is complete.

``export --output store.db`` truncated the SQLite file under the open connection (every
record gone, held ones included), and ``-o F --erasures F`` let the two handles overwrite
each other with exit 0 (the erasures lost: an import from F accepts erased text again).
"""

from __future__ import annotations

import os
import stat
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
        # checked before any record is read: a missing folder was found only once the
        # file was opened, after the whole store was written for -o, and the error named
        # the hidden temporary file, not the flag (audit 52i)
        folder = _place(path).parent
        if not folder.is_dir():
            return f"{flag} {path}: no such folder {folder}"
        if not os.access(folder, os.W_OK | os.X_OK):
            return f"{flag} {path}: the folder {folder} is not writable"
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
        place = _place(place)
        tmp = place.with_name(f".{place.name}.{uuid.uuid4().hex[:8]}.tmp")
        self._files[place] = tmp
        try:  # created with the replaced file's mode before any byte is written: a private
            # backup's new content is never readable by others, not even while it is staged
            mode = stat.S_IMODE(os.stat(place).st_mode)
        except FileNotFoundError:
            return tmp
        # its owner may always write it: the file is opened again by name to be written,
        # and a read-only place (0444) made that a PermissionError where the rename had
        # replaced it (audit 52m2); ``commit`` sets the place's own mode once it is written
        staging = mode | stat.S_IRUSR | stat.S_IWUSR
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, staging)
        os.fchmod(fd, staging)  # the umask applied at creation
        os.close(fd)
        return tmp

    def open(self, place: Path) -> IO[str]:
        f = self.path(place).open("w", encoding="utf-8")
        self._open.append(f)
        return f

    def commit(self) -> None:
        for f in self._open:
            f.close()
        for place, tmp in self._files.items():
            try:  # a file replaced keeps its permissions, as a plain write keeps them: a
                # backup kept private (0600) became world-readable at the next export
                os.chmod(tmp, stat.S_IMODE(os.stat(place).st_mode))
            except FileNotFoundError:
                pass  # a new file: the mode any new file gets here
            os.replace(tmp, place)
        self._files.clear()

    def discard(self) -> None:
        """What ``commit`` did not move (a failure part way) is removed."""
        for f in self._open:
            f.close()
        for tmp in self._files.values():
            tmp.unlink(missing_ok=True)
        self._files.clear()


def _place(path: Path) -> Path:
    """Where ``path`` writes: a symbolic link's file, as a plain write follows it (the
    rename replaced the link itself and left the file it names stale, audit 52i)."""
    return Path(os.path.realpath(path))
