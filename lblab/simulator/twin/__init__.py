"""The simulated twin of a run: the same testbed in the simulator, and how far it misses.

``lblab twin RESULTS_DIR`` reads a finished run (live or simulated), builds its twin and
writes ``RESULTS_DIR/twin/``: the simulated run (the tables ``lblab simulate`` writes),
one ``scale-N/`` folder per ``--scale`` and ``twin.json`` with measured vs simulated
figures, prediction errors and rank agreement (Kendall tau-b).

The twin of a run with its experiment file in its manifest (every live run, and a
simulated one ``lblab run`` made) is that file's phases simulated: each phase's SimConfig
is the simulated testbed's (``simulator.simulated_testbed.phase_config``: servers,
strategy options, cells, seed, deadline, agent interval, balancers, timeline and
length), with what the twin fits in place of what the file says. A scaled twin
(``--scale N``) cannot be the run's file, nor can the twin of a run ``lblab simulate``
made (no file): the twin builds those from the same parts.

What the twin takes from the run is all measured or configured; what it fits are
measured quantities (service times, time outside the slot, think time), never the
figures it is compared on. One module per step, in the order ``make_twin`` takes them:

- ``testbed``: the run's servers in order (weights, workers, max-inflight, CPU quotas),
  strategies and their options, scenarios (request shapes) and their load, request
  timeout (deadline), agent interval, replications and seeds, and the phases its file
  ran, from its manifest.
- ``measure``: the run's figures by the report's own definitions (``analysis.metrics``),
  in measured windows as in the run (the same share of warm-up) on both sides.
- ``measured_service``: each server's service times, resampled per request shape.
- ``model``: per scenario, the time outside the slot (``FrontEnd``), the think time, and
  which CPU quotas bound and what a request costs a server under its quota.
- ``solve``: the simulator's configs (the file's phases with the fitted parts, or built
  for N servers), and each strategy's front-end load term solved for the utilisation
  its own simulation gives the servers.
- ``scale``: how long a scaled twin's (``--scale N``) phases run.
- ``compare``: measured vs simulated per cell, the rankings, and the summary.
- ``build``: ``make_twin``, which takes those steps and writes ``twin/``.
"""

from lblab.simulator.twin.build import make_twin
from lblab.simulator.twin.compare import MISS, TAU_TARGET
from lblab.simulator.twin.measure import FIGURES

__all__ = ["FIGURES", "MISS", "TAU_TARGET", "make_twin"]
