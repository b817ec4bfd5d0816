"""CPython's cyclic garbage collector in the balancer's process.

The per-request path makes no reference cycles: reference counting frees every request's
objects. The cyclic collector still ran, because it counts container objects allocated
and not yet freed, and a balancer's requests in flight hold about ten each: at 64 in
flight that count hovers around the default threshold of 700 and crosses it every few
hundred requests, with nothing to find. Every tenth of those collections is a middle one,
and every so often a full one walks all ~45,000 objects left from start-up (modules,
functions, classes): 20-30 ms, during which no frame is forwarded. Measured on the
balancer at 64 in flight: 0.67 us of CPU a request in the collector, and a full
collection every 1.5 s (docs/FIELD-NOTES.md, "Where lblab's balancer spends its CPU").

``settle()``, called once start-up is done, takes those objects out of the collector's
view (``gc.freeze``) and raises the first threshold far above what requests in flight
hold, so a collection runs only when container objects really pile up (cycles, or a
leak). ``prometheus_text()`` exposes the collector's counts in the names of
``prometheus_client``'s ``GCCollector``. Locust's processes, timed the same way over a
quick run, ran no collection under load, so they are left as they are; the servers'
collections are part of the work they model.
"""

from __future__ import annotations

import gc

from lblab.exposition import family

YOUNG_THRESHOLD = 10_000
"""Container objects allocated and not freed before a young collection runs (CPython's
default: 700). Requests in flight hold about ten each, so 64 in flight stay far below it;
what piles up beyond it is collected as before, in young collections of at most this size
(about a millisecond)."""


def settle() -> None:
    """After start-up: collect once, freeze what is left, raise the young threshold."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)


def prometheus_text() -> str:
    """The collector's counts per generation, as Prometheus exposition lines."""
    stats = gc.get_stats()
    out: list[str] = []
    for name, key, help_text in (
        ("python_gc_objects_collected_total", "collected", "Objects collected during gc"),
        ("python_gc_objects_uncollectable_total", "uncollectable",
         "Uncollectable objects found during GC"),
        ("python_gc_collections_total", "collections",
         "Number of times this generation was collected"),
    ):  # fmt: skip
        samples = [(f'{{generation="{g}"}}', s[key]) for g, s in enumerate(stats)]
        out += family(name, "counter", help_text, samples)
    return "\n".join(out) + "\n"
