"""What one Locust process needs to generate one phase's load, as one JSON value.

The runner (or an ansible play on a loader host) passes it as ``--lblab-spec JSON``;
Locust forwards custom arguments from the master to its workers, so a distributed run
needs it only on the master's command line.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from lblab.errors import ConfigError
from lblab.experiment.runconfig import ARRIVALS, MODELS
from lblab.experiment.spikes import Spike
from lblab.scenarios import Cell, Scenario
from lblab.traces import TraceWindow


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadSpec:
    run_id: str
    scenario: Scenario
    strategy: str
    replication: int
    model: str = "closed"
    think_time: tuple[float, float] = (0.0, 0.0)
    # open and trace models: requests per second over all generators (trace: the mean
    # the replay is time-scaled to; 0 keeps the trace's own pace)
    rate: float = 0.0
    arrival: str = "constant"
    count: int | None = None  # open, trace: a fixed number of requests instead of a duration
    duration: float = 0.0  # open, trace: seconds of arrivals (warm-up included)
    generators: int = 1  # open, trace: Locust users sharing the schedule (one per worker)
    request_timeout: float = 30.0
    seed: int = 0
    records_dir: str = ""  # where each Locust process writes its request records
    balancers: tuple[str, ...] = ()
    """``HOST:PORT`` of each balancer node ``b1`` .. ``bK`` the users spread over (closed
    model: user by user; open and trace: send by send); empty: Locust's ``--host``, ``b1``."""
    spikes: tuple[Spike, ...] = ()
    """The phase's ``spike`` events (``experiment/spikes.py``), from the users' start."""
    users: int = 0
    """Closed model with spikes: the users outside them (Locust starts the most a spike
    needs; the others wait for theirs)."""

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise ConfigError(f"load model {self.model!r} is not one of {', '.join(MODELS)}")
        if self.arrival not in ARRIVALS:
            raise ConfigError(f"arrival {self.arrival!r} is not one of {', '.join(ARRIVALS)}")
        lo, hi = self.think_time
        if not 0 <= lo <= hi:
            raise ConfigError(f"think_time {self.think_time}: needs 0 <= min <= max seconds")
        if self.request_timeout <= 0:
            raise ConfigError("request_timeout must be above 0 seconds")
        if self.model == "open" and self.rate <= 0:
            raise ConfigError("the open load model needs rate > 0 requests per second")
        if (self.model == "trace") != (self.scenario.trace is not None):
            raise ConfigError(
                f"scenario {self.scenario.name}: a trace scenario runs under the trace model "
                f"and only it, not the {self.model} model"
            )

    def to_json(self) -> str:
        data = asdict(self)
        data["scenario"] = {
            "name": self.scenario.name,
            "cells": [[c.name, c.package_bytes, c.work_bytes] for c in self.scenario.cells],
            "trace": None if self.scenario.trace is None else asdict(self.scenario.trace),
        }
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> LoadSpec:
        try:
            data = json.loads(text)
            sc = data.pop("scenario")
            trace = sc["trace"] and TraceWindow(**sc["trace"])
            cells = tuple(Cell(n, p, w) for n, p, w in sc["cells"])
            scenario = Scenario(sc["name"], cells, trace)
            data["think_time"] = tuple(data["think_time"])
            data["balancers"] = tuple(data.get("balancers", ()))
            data["spikes"] = tuple(Spike(**s) for s in data.get("spikes", ()))
            return cls(scenario=scenario, **data)
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"--lblab-spec is not a valid load spec: {exc}") from exc
