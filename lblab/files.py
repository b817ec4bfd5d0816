"""Writing results so that a failed write leaves nothing half-written and says why.

Every file of a run that a reader may open (the manifest, table parts, tables, record
chunks, progress files) is written whole or not at all: to a temporary name beside it,
flushed to disk, then renamed over the old one (``write_atomically``). When the write
fails (a full disk, a quota, a read-only or vanished folder) the temporary file is
removed, the old file stays as it was, and the caller gets a ``WriteFailed`` that names
the path, the reason and, for lack of space, how much is free.

A full disk would also stop the one write that says what happened: the manifest. A run
therefore holds a small ``Reserve`` (a ballast file) from its start, and frees it to
write its last manifest when a write has failed.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from lblab.errors import WriteFailed

NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT})
RESERVE_FILE = ".reserve"
RESERVE_BYTES = 4 * 1024 * 1024
"""Room kept for the last manifest; manifests of the largest presets are under 1 MB."""


def write_atomically(path: Path, write: Callable[[BinaryIO], object]) -> None:
    """Write ``path`` whole: ``write(file)`` fills a temporary file, then it is flushed,
    synced and renamed into place. Raises ``WriteFailed`` (the old file untouched)."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, "wb") as out:
            write(out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        _remove_quietly(tmp)
        raise write_failed(path, exc) from exc
    except BaseException:
        _remove_quietly(tmp)
        raise


def write_bytes_atomically(path: Path, data: bytes) -> None:
    write_atomically(path, lambda out: out.write(data))


def make_folder(path: Path) -> Path:
    """``mkdir -p`` that fails as a ``WriteFailed``; returns ``path``."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_failed(path, exc) from exc
    return path


def write_failed(path: Path, exc: OSError) -> WriteFailed:
    """The ``WriteFailed`` for ``exc`` raised while writing ``path``: what, where, why."""
    reason = exc.strerror or str(exc)
    message = f"cannot write {path}: {reason}"
    if exc.errno in NO_ROOM:
        free = free_bytes(path)
        if free is not None:
            message += f" ({human_bytes(free)} free on its filesystem)"
    return WriteFailed(message, path=path, no_room=exc.errno in NO_ROOM)


def free_bytes(path: Path) -> int | None:
    """Free bytes on the filesystem that holds ``path`` (or its nearest existing parent)."""
    for folder in (path, *path.parents):
        if folder.exists():
            try:
                return shutil.disk_usage(folder).free
            except OSError:
                return None
    return None


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


def folder_bytes(folder: Path) -> int:
    """Bytes of the files under ``folder`` (what a run has written so far)."""
    total = 0
    for root, _, names in os.walk(folder):
        for name in names:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue  # replaced while we looked
    return total


RESUME_FREE_BYTES = 64 * 1024
"""Free room an ``AppendLog`` waits for before it tries again after a failed batch."""


class AppendLog:
    """A file of lines that grows by whole batches, for a process that must go on when
    its disk is full (the balancer's picks, an agent's samples).

    A batch the filesystem has no room for is dropped whole (the file is cut back to its
    size before the batch, so no half line is left for a reader or a later batch to
    run into), counted in ``dropped``, and logged once per spell of failures; the
    process carries on, and writes again once there is room: once the filesystem has
    ``RESUME_FREE_BYTES`` free. Until then a batch is dropped without a write, so a
    short batch that happens to fit into the unused end of the file's last block does
    not end the spell only for the next one to start it again (two warnings a flap)."""

    def __init__(self, path: Path, log: logging.Logger) -> None:
        self.path, self._log = path, log
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.dropped = 0  # lines
        self._failing = False

    def append(self, data: bytes, lines: int) -> bool:
        """Append ``data`` (``lines`` whole lines) or nothing; True when written."""
        if self._failing:
            free = os.fstatvfs(self._fd)
            if free.f_bavail * free.f_frsize < max(RESUME_FREE_BYTES, len(data)):
                self.dropped += lines
                return False
        size = os.fstat(self._fd).st_size
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, size)
            self.dropped += lines
            if not self._failing:
                self._failing = True
                self._log.warning(
                    "%s; dropping what cannot be written", write_failed(self.path, exc)
                )
            return False
        if self._failing:
            self._failing = False
            self._log.warning(
                "%s is written again (%d lines dropped so far)", self.path, self.dropped
            )
        return True

    def close(self) -> None:
        os.close(self._fd)
        if self.dropped:
            self._log.warning("%s: %d lines were dropped for lack of room", self.path, self.dropped)


class Reserve:
    """A ballast file of ``RESERVE_BYTES`` in a folder: room for one last write when the
    filesystem is full. ``hold`` raises ``WriteFailed`` if even that much is not free:
    a run that cannot keep it could not say how it ended."""

    def __init__(self, folder: Path, size: int = RESERVE_BYTES) -> None:
        self.path, self.size = folder / RESERVE_FILE, size

    def hold(self) -> None:
        try:
            with open(self.path, "wb") as out:
                # Real blocks, not a sparse file: posix_fallocate fails now if there is
                # no room, rather than the last manifest later.
                os.posix_fallocate(out.fileno(), 0, self.size)
        except OSError as exc:
            _remove_quietly(self.path)
            raise write_failed(self.path, exc) from exc

    def release(self) -> None:
        _remove_quietly(self.path)


def _remove_quietly(path: Path) -> None:
    with contextlib.suppress(OSError):  # nothing more can be done about it
        path.unlink(missing_ok=True)
