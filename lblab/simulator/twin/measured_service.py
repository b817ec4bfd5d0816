"""Each server's service times as the twin resamples them: its own, per request shape.

The twin does not assume a service-time distribution: it draws each request's time from
what that server reported for that shape (``service_ms``, the slot's time from start to
end of the work, so CPU quotas, throttling and contention on a shared machine are in it).
A shape the server never served is priced by the JSON-work cost model that
``lblab calibrate`` fits to the same rows, times a resampled ratio of measured to
predicted, so its spread is the server's too. ``ScaledService`` multiplies the draws by a
server's CPU demand per request where its quota bound (``model._demand_scale``).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from lblab.simulator.service import JsonCost, fit_cost_model
from lblab.simulator.workload import Cell

MAX_SAMPLES_PER_CELL = 5000


@dataclass(frozen=True, slots=True, eq=False)
class MeasuredService:
    """A server's own measured service times, resampled per request shape.

    ``samples[(package_bytes, work_bytes)]`` holds seconds; a shape without samples is
    priced by ``fit`` (the calibrated cost model) times a resampled measured ratio
    of service time to the fit's prediction, so its spread is the server's too.
    """

    fit: JsonCost
    samples: Mapping[Cell, tuple[float, ...]]
    ratios: tuple[float, ...]
    r2: float

    @property
    def mean_s(self) -> float:
        pooled = [s for values in self.samples.values() for s in values]
        return float(np.mean(pooled)) if pooled else self.fit.mean_s

    def shape_mean_s(self, work_bytes: int, package_bytes: int) -> float:
        """Mean seconds of one request shape: its samples', else the fit's times the
        mean measured ratio (what ``sample`` draws from, on average)."""
        measured = self.samples.get((package_bytes, work_bytes))
        if measured:
            return float(np.mean(measured))
        ratio = float(np.mean(self.ratios)) if self.ratios else 1.0
        return self.fit.predict(work_bytes, package_bytes) * ratio

    def sample(self, rng: random.Random, work_bytes: int, package_bytes: int) -> float:
        measured = self.samples.get((package_bytes, work_bytes))
        if measured:
            return measured[int(rng.random() * len(measured))]
        ratio = self.ratios[int(rng.random() * len(self.ratios))] if self.ratios else 1.0
        return self.fit.sample(rng, work_bytes, package_bytes) * ratio

    def spec(self) -> str:
        return f"measured({len(self.samples)} shapes; otherwise {self.fit.spec()})"

    def describe(self) -> dict[str, Any]:
        return {
            "fit": self.fit.spec(),
            "fit_r2": round(self.r2, 4),
            "service_ms_mean": {
                f"{p}B+{w}B": round(1000.0 * float(np.mean(v)), 4)
                for (p, w), v in sorted(self.samples.items())
            },
            "samples": sum(len(v) for v in self.samples.values()),
        }


def fit_service(rows: pd.DataFrame, seed: int = 1) -> MeasuredService:
    """The service model of one server from its rows (``package_bytes``, ``work_bytes``,
    ``service_ms`` of successful requests)."""
    fit = fit_cost_model(rows["work_bytes"], rows["package_bytes"], rows["service_ms"])
    rng = np.random.default_rng(seed)
    samples: dict[Cell, tuple[float, ...]] = {}
    for (package, work), group in rows.groupby(["package_bytes", "work_bytes"], sort=True):
        seconds = group["service_ms"].to_numpy(dtype=float) / 1000.0
        if len(seconds) > MAX_SAMPLES_PER_CELL:
            seconds = rng.choice(seconds, MAX_SAMPLES_PER_CELL, replace=False)
        samples[(int(package), int(work))] = tuple(float(s) for s in seconds)
    predicted = (
        fit.model.a
        + fit.model.b * rows["work_bytes"].to_numpy(dtype=float)
        + fit.model.c * rows["package_bytes"].to_numpy(dtype=float)
    )
    ratio = rows["service_ms"].to_numpy(dtype=float) / 1000.0 / np.maximum(predicted, 1e-9)
    if len(ratio) > MAX_SAMPLES_PER_CELL:
        ratio = rng.choice(ratio, MAX_SAMPLES_PER_CELL, replace=False)
    return MeasuredService(fit.model, samples, tuple(float(r) for r in ratio), fit.r2)


@dataclass(frozen=True, slots=True, eq=False)
class ScaledService:
    """A measured service model whose times are multiplied by ``scale``."""

    base: MeasuredService
    scale: float

    @property
    def mean_s(self) -> float:
        return self.base.mean_s * self.scale

    def sample(self, rng: random.Random, work_bytes: int, package_bytes: int) -> float:
        return self.base.sample(rng, work_bytes, package_bytes) * self.scale

    def spec(self) -> str:
        return f"{self.base.spec()} x{self.scale:.3g}"
