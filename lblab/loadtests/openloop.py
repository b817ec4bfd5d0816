"""The open load model's schedule: when request k is due, regardless of responses.

A closed model (users that wait for each answer) sends less when the system slows down,
so its latencies understate what a steady stream of clients would see: coordinated
omission (docs/FIELD-NOTES.md, "Locust"). The open model fixes the send times up front:

    constant: t_k = t0 + k / rate
    poisson:  t_k = t0 + sum of k exponential gaps with mean 1 / rate (seeded)

and a request's latency is measured from its due time t_k, not from when the sender got
round to it. With ``count`` the schedule has exactly that many requests (the Ingram
experiment: N requests 25 ms apart); otherwise it ends at ``duration``.

Pure functions of (rate, kind, rng): the Locust user drives them with gevent, the tests
check them directly.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

from lblab.errors import ConfigError
from lblab.experiment.runconfig import ARRIVALS


def due_times(
    rate: float,
    arrival: str,
    rng: random.Random,
    *,
    duration: float | None = None,
    count: int | None = None,
    offset: float = 0.0,
) -> Iterator[float]:
    """Due times in seconds from the schedule's start, ascending.

    ``offset`` shifts a constant schedule (a fraction of one gap) so that several
    generators sharing one rate interleave instead of firing together.
    """
    if rate <= 0:
        raise ConfigError(f"rate: {rate!r} must be above 0 requests per second")
    if arrival not in ARRIVALS:
        raise ConfigError(f"arrival: {arrival!r} is not one of {', '.join(ARRIVALS)}")
    if duration is None and count is None:
        raise ConfigError("an open-loop schedule needs a duration or a request count")
    k, t = 0, offset
    while (count is None or k < count) and (duration is None or t < duration):
        yield t
        k += 1
        t = offset + k / rate if arrival == "constant" else t + rng.expovariate(rate)
