"""Closed-form queueing results the simulator is checked against (``lblab validate``).

All for exponential service with rate ``mu`` and Poisson arrivals; ``rho`` is the load
per server (arrival rate / (servers * mu)); results are mean times in system (queue
plus service), in the time unit of ``1 / mu``.

- Random routing: each server is an M/M/1, ``T = 1 / (mu (1 - rho))``.
- Round robin over N servers: each server sees every N-th Poisson arrival, so Erlang-N
  interarrival times at rate ``L = N rho mu`` per phase (E_N/M/1). For a GI/M/1 queue
  ``T = 1 / (mu (1 - sigma))`` where sigma is the root in (0, 1) of
  ``sigma = A*(mu (1 - sigma))`` and ``A*(s) = (L / (L + s))^N`` is the Laplace-Stieltjes
  transform of the interarrival time (Kleinrock, *Queueing Systems I*, 6.4).
- One shared FIFO queue in front of c servers, M/M/c: Erlang C,
  ``T = 1/mu + C(c, a) / (c mu - lambda)`` with offered load ``a = lambda / mu``.
- The supermarket model (join the shortest of d queues sampled at random, n -> infinity):
  the fraction of servers with at least i jobs is ``s_i = rho^((d^i - 1) / (d - 1))``
  and ``T = sum_{i >= 1} s_i / lambda`` per server (Little), that is
  ``sum_{i >= 1} rho^((d^i - d) / (d - 1))`` (Mitzenmacher 2001; Vvedenskaya et al. 1996).
"""

from __future__ import annotations

import math

from lblab.errors import ConfigError


def _check_load(rho: float) -> None:
    if not 0.0 < rho < 1.0:
        raise ConfigError(f"load rho {rho} must be in (0, 1) for a stable queue")


def mm1_sojourn(rho: float, mu: float = 1.0) -> float:
    """Mean time in system of an M/M/1 queue."""
    _check_load(rho)
    return 1.0 / (mu * (1.0 - rho))


def erlang_sigma(n: int, rho: float, mu: float = 1.0) -> float:
    """The E_N/M/1 root sigma in (0, 1) of ``sigma = (L / (L + mu (1 - sigma)))^N``.

    ``g(s) - s`` is positive at 0 and negative just below the trivial root 1 (there the
    slope of g is ``1 / rho > 1``), so bisection between them finds it.
    """
    _check_load(rho)
    if n < 1:
        raise ConfigError(f"Erlang order {n} must be at least 1")
    rate = n * rho * mu

    def excess(s: float) -> float:
        return (rate / (rate + mu * (1.0 - s))) ** n - s

    lo, hi = 0.0, 1.0 - 1e-12
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if excess(mid) > 0.0:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-15:
            break
    return (lo + hi) / 2.0


def erlang_m1_sojourn(n: int, rho: float, mu: float = 1.0) -> float:
    """Mean time in system of an E_N/M/1 queue (round robin over N servers)."""
    return 1.0 / (mu * (1.0 - erlang_sigma(n, rho, mu)))


def erlang_c(servers: int, offered: float) -> float:
    """Probability that an arrival waits in an M/M/c queue (Erlang C).

    ``offered`` is ``a = lambda / mu``; computed from the Erlang B recursion
    ``B_k = a B_{k-1} / (k + a B_{k-1})``, which never overflows.
    """
    if servers < 1:
        raise ConfigError(f"servers {servers} must be at least 1")
    _check_load(offered / servers)
    b = 1.0
    for k in range(1, servers + 1):
        b = offered * b / (k + offered * b)
    rho = offered / servers
    return b / (1.0 - rho * (1.0 - b))


def mmc_sojourn(servers: int, rho: float, mu: float = 1.0) -> float:
    """Mean time in system of an M/M/c queue (one shared FIFO queue, c servers)."""
    offered = servers * rho
    wait = erlang_c(servers, offered) / (servers * mu - offered * mu)
    return 1.0 / mu + wait


def relaxation_time(servers: int, rho: float, mu: float = 1.0) -> float:
    """Time for an M/M/c queue to approach its steady state: ``1 / (c mu (1 - sqrt(rho))^2)``.

    The relaxation time of the M/M/1 queue (Morse 1955; Cohen, *The Single Server Queue*)
    and its heavy-traffic M/M/c form: how long a simulation started empty must warm up.
    """
    _check_load(rho)
    return 1.0 / (servers * mu * (1.0 - math.sqrt(rho)) ** 2)


def supermarket_tail(d: int, rho: float, i: int) -> float:
    """Fraction of servers with at least ``i`` jobs in the supermarket model (n -> inf)."""
    _check_load(rho)
    if d < 2:
        raise ConfigError(f"choices d {d} must be at least 2 (d = 1 is random routing)")
    if i < 0:
        raise ConfigError(f"queue length {i} must be 0 or more")
    return rho ** ((d**i - 1) / (d - 1))


def supermarket_sojourn(d: int, rho: float, mu: float = 1.0) -> float:
    """Mean time in system under JSQ(d), n -> infinity: ``sum_i s_i / (rho mu)``.

    The tails fall doubly exponentially, so the sum stops once a term is below 1e-16.
    """
    total, i = 0.0, 1
    while True:
        s = supermarket_tail(d, rho, i)
        total += s
        if s < 1e-16 * total:
            return total / (rho * mu)
        i += 1
