"""A small filesystem to fill: what a full results disk does to the writers (root only:
a tmpfs is mounted for each use and taken away after)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")


@contextlib.contextmanager
def small_filesystem(path: Path, megabytes: int) -> Iterator[Path]:
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(path)],
                   check=True, timeout=10)  # fmt: skip
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False, timeout=10)


def fill(folder: Path) -> Path:
    """Take every free byte of ``folder``'s filesystem; returns the filler file."""
    filler = folder / f"filler-{time.monotonic_ns()}"
    with open(filler, "wb", buffering=0) as out:
        with contextlib.suppress(OSError):
            os.posix_fallocate(out.fileno(), 0, shutil.disk_usage(folder).free)
        chunk = b"\0" * (1 << 16)
        with contextlib.suppress(OSError):
            while True:  # whatever fallocate left (bounded: the filesystem is small)
                out.write(chunk)
    return filler
