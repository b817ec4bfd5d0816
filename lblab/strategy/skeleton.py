"""``lblab strategy new NAME``: a strategy of your own to start from, and its test."""

from __future__ import annotations

import re
from pathlib import Path

from lblab.balancer.strategies.specs import NAME_PATTERN
from lblab.errors import ConfigError
from lblab.files import write_bytes_atomically

STRATEGY = '''"""{name}: the fewest requests in flight among `choices` backends drawn at random.

A strategy of your own for lblab (docs/guides/write-a-strategy.md). Run it with
`-s {file}:{cls}` wherever lblab takes a strategy, and check it with
`lblab strategy check {file}:{cls}`.
"""

from __future__ import annotations

from dataclasses import dataclass

from lblab.strategy import Strategy, check_option, eligible


@dataclass(frozen=True, slots=True)
class {cls}Config:
    """The options: `-s '{file}:{cls}[choices=3]'`, or [strategy_options.{name}]."""

    choices: int = 2

    def __post_init__(self) -> None:
        check_option(self.choices >= 1, f"choices={{self.choices}}: must be at least 1")


class {cls}(Strategy):
    name = "{name}"
    summary = "fewest in flight among `choices` backends drawn at random"
    Config = {cls}Config

    def pick(self, backends, request, now):
        # `backends` is the whole pool in its list order, unavailable ones too; never
        # return one for which eligible() is false. `now` is the driver's clock (the
        # balancer's or the simulator's) in seconds: read no other. Draw only from
        # self.rng, which the driver seeds, so a run can be repeated exactly.
        candidates = [b for b in backends if eligible(b, request)]
        if not candidates:
            return None  # the balancer answers REJECTED
        drawn = self.rng.sample(candidates, min(self.config.choices, len(candidates)))
        least = min(b.inflight for b in drawn)
        tied = [b for b in drawn if b.inflight == least]
        if len(tied) > 1:
            self.ties += 1  # counted in /metrics and the run's tables
        return tied[0]  # drawn at random, so the first of the tie is a random one

    # Optional hooks (see lblab.strategy): on_dispatch(backend, request, now),
    # on_complete(backend, request, outcome, now), on_report(backend, report, now) with
    # uses_agent_reports = True, on_pool_change(backends, now) (call super() first),
    # probe_targets(backends, now) and on_probe(backend, rif, latency_ms, now) with
    # uses_probes = True.
'''

TEST = '''"""Tests of {name} (run: pytest {test})."""

from __future__ import annotations

import random
from pathlib import Path

from lblab.strategy import BackendView, RequestView
from lblab.strategy.conformance import check

SPEC = f"{{Path(__file__).with_name('{file}')}}:{cls}"


def test_it_keeps_the_contract() -> None:
    failed = [f"{{f.check}}: {{f.line}}" for f in check(SPEC, examples=30) if not f.ok]
    assert not failed, failed


def test_it_picks_the_least_loaded_of_its_draws() -> None:
    from lblab.balancer.strategies.registry import make_strategy

    strategy = make_strategy(SPEC, {{"choices": "3"}}, rng=random.Random(1))
    backends = [BackendView(id=f"s{{i}}", index=i, inflight=i) for i in range(3)]
    assert strategy.pick(backends, RequestView(request_id=1), now=0.0) is backends[0]
'''


def write_skeleton(name: str, folder: Path, *, force: bool = False) -> list[Path]:
    """Write ``NAME.py`` and ``test_NAME.py`` (file names with ``_`` for ``-``)."""
    if not NAME_PATTERN.fullmatch(name):
        raise ConfigError(
            f"strategy name {name!r}: use lower-case letters, digits, '-', '_' or '.', "
            "at most 48, starting with a letter or digit (e.g. least-of-3)"
        )
    stem = re.sub(r"\W", "_", name)
    cls = "".join(part.capitalize() for part in re.split(r"[^a-zA-Z0-9]", name) if part)
    cls = cls if cls[:1].isalpha() else f"S{cls}"
    files = {folder / f"{stem}.py": STRATEGY, folder / f"test_{stem}.py": TEST}
    for path in files:
        if path.exists() and not force:
            raise ConfigError(f"{path} exists; give --force to overwrite it, or another --dir")
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for path, template in files.items():
        text = template.format(name=name, cls=cls, file=f"{stem}.py", test=f"test_{stem}.py")
        write_bytes_atomically(path, text.encode())
        written.append(path)
    return written
