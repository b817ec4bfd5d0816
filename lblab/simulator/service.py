"""Service-time models: how long a server worker is busy with one request.

A model is a frozen value with ``sample(rng, work_bytes, package_bytes) -> seconds``
and a ``mean_s`` the server uses for its own wait estimate. They are written as short
specs on the command line and in TOML:

==========================================  ==============================================
``fixed:250ms``                             always 250 ms (Ingram's servers)
``exp:10ms``                                exponential, mean 10 ms (M/M/c)
``bimodal:1ms,500ms,0.1``                   500 ms with probability 0.1, else 1 ms (Cheetah
                                            Fig. 8's workload)
``lognormal:50ms,1.5``                      lognormal with mean 50 ms and shape sigma 1.5
                                            (heavy-tailed connection durations)
``json:a=0.3ms,b=2e-8,c=4e-9``              the JSON-work cost model
                                            ``a + b * work_bytes + c * package_bytes``
                                            (b, c in seconds per byte), calibrated from a
                                            live run with ``fit_cost_model``
==========================================  ==============================================

``fit_cost_model`` fits a, b, c by least squares to measured
``(work_bytes, package_bytes, service_ms)`` samples (e.g. a results dir's requests table).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from lblab.config import check_range, parse_duration, parse_float
from lblab.errors import ConfigError

EXAMPLES = (
    "fixed:250ms, exp:10ms, bimodal:1ms,500ms,0.1, lognormal:50ms,1.5, json:a=0.3ms,b=2e-8,c=4e-9"
)


@dataclass(frozen=True, slots=True)
class Fixed:
    seconds: float

    @property
    def mean_s(self) -> float:
        return self.seconds

    def sample(self, rng: random.Random, work_bytes: int, package_bytes: int) -> float:
        return self.seconds

    def spec(self) -> str:
        return f"fixed:{self.seconds * 1000:g}ms"


@dataclass(frozen=True, slots=True)
class Exponential:
    mean: float

    @property
    def mean_s(self) -> float:
        return self.mean

    def sample(self, rng: random.Random, work_bytes: int, package_bytes: int) -> float:
        return rng.expovariate(1.0 / self.mean)

    def spec(self) -> str:
        return f"exp:{self.mean * 1000:g}ms"


@dataclass(frozen=True, slots=True)
class Bimodal:
    fast: float
    slow: float
    p_slow: float

    def __post_init__(self) -> None:
        check_range("service bimodal: p_slow", self.p_slow, minimum=0, maximum=1)

    @property
    def mean_s(self) -> float:
        return self.fast + self.p_slow * (self.slow - self.fast)

    def sample(self, rng: random.Random, work_bytes: int, package_bytes: int) -> float:
        return self.slow if rng.random() < self.p_slow else self.fast

    def spec(self) -> str:
        return f"bimodal:{self.fast * 1000:g}ms,{self.slow * 1000:g}ms,{self.p_slow:g}"


@dataclass(frozen=True, slots=True)
class LogNormal:
    mean: float
    sigma: float

    def __post_init__(self) -> None:
        # Past sigma 10 the mean rests on draws rarer than one in 10^20 (mu = log(mean) - 50).
        check_range("service lognormal: sigma", self.sigma, above=0, maximum=10)

    @property
    def mean_s(self) -> float:
        return self.mean

    def sample(self, rng: random.Random, work_bytes: int, package_bytes: int) -> float:
        # E[X] = exp(mu + sigma^2 / 2), so mu follows from the requested mean.
        return rng.lognormvariate(math.log(self.mean) - self.sigma**2 / 2, self.sigma)

    def spec(self) -> str:
        return f"lognormal:{self.mean * 1000:g}ms,{self.sigma:g}"


@dataclass(frozen=True, slots=True)
class JsonCost:
    """``service_s = a + b * work_bytes + c * package_bytes`` (deterministic)."""

    a: float
    b: float
    c: float
    typical_work_bytes: int = 10_000
    """Work size used for ``mean_s`` (the server's own estimate of one request)."""

    def __post_init__(self) -> None:
        for name in ("b", "c"):  # a millisecond a byte is past any CPU (calibrated: ~1e-8)
            check_range(f"service json: {name}", getattr(self, name), minimum=0, maximum=1e-3)

    @property
    def mean_s(self) -> float:
        return self.predict(self.typical_work_bytes, 0)

    def predict(self, work_bytes: float, package_bytes: float) -> float:
        """Seconds for one request of this shape."""
        return self.a + self.b * work_bytes + self.c * package_bytes

    def sample(self, rng: random.Random, work_bytes: int, package_bytes: int) -> float:
        return self.predict(work_bytes, package_bytes)

    def spec(self) -> str:
        return f"json:a={self.a * 1000:g}ms,b={self.b:g},c={self.c:g}"


ServiceModel = Fixed | Exponential | Bimodal | LogNormal | JsonCost


def _positive(value: float, what: str, spec: str) -> float:
    if value <= 0:
        raise ConfigError(f"service {spec!r}: {what} must be > 0")
    return value


def parse_service(spec: str, field: str = "service") -> ServiceModel:
    """A service model from its spec string; ``ConfigError`` names what is wrong."""
    kind, sep, rest = spec.strip().partition(":")
    args = [a.strip() for a in rest.split(",")] if sep else []
    try:
        if kind == "fixed" and len(args) == 1:
            return Fixed(parse_duration(args[0], field))
        if kind == "exp" and len(args) == 1:
            return Exponential(_positive(parse_duration(args[0], field), "mean", spec))
        if kind == "bimodal" and len(args) == 3:
            return Bimodal(
                parse_duration(args[0], field),
                parse_duration(args[1], field),
                parse_float(args[2], "p_slow"),
            )
        if kind == "lognormal" and len(args) == 2:
            return LogNormal(
                _positive(parse_duration(args[0], field), "mean", spec),
                parse_float(args[1], "sigma"),
            )
        if kind == "json" and args:
            named = dict(a.partition("=")[::2] for a in args)
            if set(named) - {"a", "b", "c"} or "a" not in named:
                raise ConfigError(f"{field}: {spec!r}: json takes a=DURATION,b=S_PER_BYTE,c=...")
            return JsonCost(
                parse_duration(named["a"], field),
                parse_float(named.get("b", "0"), "b"),
                parse_float(named.get("c", "0"), "c"),
            )
    except ConfigError as exc:
        raise ConfigError(f"{exc} (in {field} {spec!r})") from None
    raise ConfigError(f"{field}: {spec!r} is not a service model; write e.g. {EXAMPLES}")


@dataclass(frozen=True, slots=True)
class CostFit:
    model: JsonCost
    r2: float
    samples: int


def fit_cost_model(
    work_bytes: Sequence[float], package_bytes: Sequence[float], service_ms: Sequence[float]
) -> CostFit:
    """Least-squares fit of ``service_ms = a + b * work + c * package``.

    Coefficients that come out negative (noise on a term that barely matters) are
    clamped to 0 and the rest refitted, so the model never predicts negative work.
    """
    import numpy as np

    y = np.asarray(service_ms, dtype=float) / 1000.0
    cols = {
        "a": np.ones_like(y),
        "b": np.asarray(work_bytes, dtype=float),
        "c": np.asarray(package_bytes, dtype=float),
    }
    if len(y) < 3:
        raise ConfigError(f"calibration needs at least 3 samples, got {len(y)}")
    keep = list(cols)
    while True:
        x = np.column_stack([cols[k] for k in keep])
        coef, *_ = np.linalg.lstsq(x, y, rcond=None)
        negative = [k for k, v in zip(keep, coef, strict=True) if v < 0 and k != "a"]
        if not negative:
            break
        keep.remove(negative[0])
    fitted = dict.fromkeys(cols, 0.0) | dict(zip(keep, map(float, coef), strict=True))
    residual = y - x @ coef
    total = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - float((residual**2).sum()) / total if total > 0 else 1.0
    model = JsonCost(max(fitted["a"], 0.0), fitted["b"], fitted["c"])
    return CostFit(model=model, r2=r2, samples=len(y))
