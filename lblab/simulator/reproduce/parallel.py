"""Independent simulation points on several processes (a reproduction's points share nothing)."""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any

Call = tuple[Callable[..., Any], tuple[Any, ...], str]
"""A top-level function, its arguments, and a label for progress messages."""


def default_jobs() -> int:
    return max(1, min(2, os.cpu_count() or 1))


def run_calls(
    calls: Sequence[Call], jobs: int = 1, progress: Callable[[str], None] | None = None
) -> list[Any]:
    """Each call's result, in the order given; ``jobs`` > 1 runs them in worker processes.

    Give the longest calls first: workers take them in order.
    """
    if jobs <= 1 or len(calls) <= 1:
        results = []
        for done, (fn, args, label) in enumerate(calls, 1):
            results.append(fn(*args))
            if progress:
                progress(f"{label} done ({done}/{len(calls)})")
        return results
    out: list[Any] = [None] * len(calls)
    context = multiprocessing.get_context("spawn")  # no fork of a process holding threads
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = {pool.submit(fn, *args): (i, label) for i, (fn, args, label) in enumerate(calls)}
        for done, future in enumerate(as_completed(futures), 1):
            i, label = futures[future]
            out[i] = future.result()
            if progress:
                progress(f"{label} done ({done}/{len(calls)})")
    return out
