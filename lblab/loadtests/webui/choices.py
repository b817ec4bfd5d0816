"""The lblab fields of Locust's web UI form, and the checks of what a user sends in them.

The fields are Locust custom arguments shown in the UI (``include_in_web_ui``, under
"Custom parameters"); those with ``choices`` show as a select. Locust copies a form's
values into its options without checking them (and answers a non-number with an
internal error), so ``parse_swarm`` checks the whole form first and the UI shows its
``ConfigError`` message instead.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from lblab.balancer.strategies.registry import strategy_names
from lblab.config import parse_assignments, parse_float, parse_int
from lblab.errors import ConfigError
from lblab.experiment.runconfig import ARRIVALS, MAX_RATE, MAX_USERS, MODELS, LoadConfig
from lblab.loadtests.webui.protocol import USER_STRATEGIES_ENV
from lblab.scenarios import CELLS, VARIATION


def strategy_choices() -> tuple[str, ...]:
    """The built-ins, then the session's own strategies (``USER_STRATEGIES_ENV``)."""
    own = [n for n in os.environ.get(USER_STRATEGIES_ENV, "").split(",") if n]
    return (*strategy_names(), *own)


UI_SCENARIOS = (*CELLS, VARIATION)
UI_MODELS = tuple(m for m in MODELS if m != "trace")
"""The trace model replays a trace scenario, and the UI offers cell scenarios only."""


@dataclass(frozen=True, slots=True)
class UiField:
    dest: str  # the option's name and the form's key
    default: str
    help: str
    choices: tuple[str, ...] | None = None

    @property
    def flag(self) -> str:
        return "--" + self.dest.replace("_", "-")


FIELDS = (
    UiField(
        "scenario",
        "sp+sr",
        "package size sp/mp/lp = 100 B/10 KB/1 MB x work sr/mr/lr = 10/100/1000 KB; "
        "variation mixes the nine",
        UI_SCENARIOS,
    ),
    UiField(
        "strategy",
        "rr",
        "the balancer's algorithm, see lblab strategies (and the config's own, by their "
        "names); Edit + Update switches it while running",
        strategy_choices(),
    ),
    UiField("strategy_options", "", "key=value,... e.g. tie=random; empty: the config's"),
    UiField(
        "load_model",
        "closed",
        "closed: users wait for each answer; open: a fixed rate, one generator",
        UI_MODELS,
    ),
    UiField("open_rate", "100", "open model: requests per second"),
    UiField("arrival", "constant", "open model: constant gaps or Poisson", ARRIVALS),
)


def add_arguments(parser: Any) -> None:
    """Register the fields on Locust's argument parser (``init_command_line_parser``)."""
    for f in FIELDS:
        parser.add_argument(
            f.flag, default=f.default, choices=f.choices, include_in_web_ui=True, help=f.help
        )


@dataclass(frozen=True, slots=True)
class Swarm:
    """What one swarm of the UI asks for."""

    scenario: str
    strategy: str
    strategy_options: dict[str, str] = field(default_factory=dict)
    load_model: str = "closed"
    open_rate: float = 0.0
    arrival: str = "constant"
    users: int = 1
    spawn_rate: float = 1.0

    def load(self, think_time: tuple[float, float]) -> LoadConfig:
        """The phase's load: Locust's users and ramp-up for the closed model; one
        generator at ``open_rate`` for the open one."""
        closed = self.load_model == "closed"
        return LoadConfig(
            model=self.load_model,
            users=self.users if closed else 1,
            spawn_rate=self.spawn_rate,
            think_time=think_time,
            rate=0.0 if closed else self.open_rate,
            arrival=self.arrival,
        )

    def same_load(self, other: Swarm) -> bool:
        """True when only the strategy or the number of users differs (what an Edit of a
        running test may change)."""
        return (self.scenario, self.load_model, self.open_rate, self.arrival) == (
            other.scenario,
            other.load_model,
            other.open_rate,
            other.arrival,
        )


def parse_swarm(form: Mapping[str, str], fallback: Mapping[str, str]) -> Swarm:
    """The swarm a web UI form asks for; ``fallback`` fills the fields it does not send.

    Raises ``ConfigError`` naming the field, the value and what to give instead.
    """

    def get(key: str) -> str:
        value = form.get(key)
        return str(fallback.get(key, "") if value is None else value).strip()

    for f in FIELDS:
        if f.choices is not None and get(f.dest) not in f.choices:
            raise ConfigError(
                f"{f.dest.replace('_', ' ')}: {get(f.dest)!r} is not one of "
                f"{', '.join(f.choices)}; choose one under Custom parameters"
            )
    model = get("load_model")
    rate = 0.0
    if model == "open":
        rate = parse_float(get("open_rate"), "open rate", above=0, maximum=MAX_RATE)
    return Swarm(
        scenario=get("scenario"),
        strategy=get("strategy"),
        strategy_options=parse_assignments(
            get("strategy_options"), "strategy options", example="tie=random"
        ),
        load_model=model,
        open_rate=rate,
        arrival=get("arrival"),
        users=parse_int(get("user_count"), "number of users", minimum=1, maximum=MAX_USERS),
        spawn_rate=parse_float(get("spawn_rate"), "ramp up", above=0, maximum=MAX_USERS),
    )
