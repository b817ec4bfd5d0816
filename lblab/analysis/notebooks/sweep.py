# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% tags=["parameters"]
# Parameters: the sweep folder. `lblab notebooks SWEEP_DIR` injects it in the next
# cell; run by hand, set LBLAB_RESULTS (the --out folder of `lblab sweep FILE`).
import os

from lblab.analysis.sweep import open_sweep

RESULTS = os.environ.get("LBLAB_RESULTS", "results/sweeps/latest")

# %% [markdown]
# # Where each strategy wins: a sweep
#
# `lblab sweep FILE --out DIR` ran every point of a grid (settings x strategies x seeds)
# in the simulator and wrote one row per point to `DIR/sweep.parquet`; this notebook
# opens that table, the same one the sweep's report (`DIR/report/index.html`) draws.
# First what was swept: the axes and their values, how many points, which seeds.

# %%
sweep = open_sweep(RESULTS)
sweep.facts()

# %%
sweep.swept()

# %% [markdown]
# ## Failed points
#
# A point that failed (the simulation raised, or its worker died) is a row with its
# `error` and no figures; the maps leave it out, so a cell may miss a strategy. Rerun
# the same `lblab sweep` command to run the failed points again.

# %%
sweep.failed()

# %% [markdown]
# ## The winner map
#
# One cell per setting of the two axes (the first two of the file). Its colour is the
# strategy best on p99 latency there, as the mean over the seeds; its shade the lead over
# the runner-up (pale: a few per cent, full: 50 % or more), also written under the name.
# A hatched cell marked **unresolved** is one the seeds do not settle: the best differs
# from one seed to another, or the runner-up's range over the seeds overlaps the best's.
# With more than two axes there is one map per combination of the others' values.

# %%
sweep.winner_map()

# %% [markdown]
# Another pair or metric: give the axes as `--axes` takes them, `"x,y"` (or one axis),
# and a metric: `throughput` (higher is better), `mean`, `p50`, `p95`, `p99`, `p99.9`,
# `failure_rate` or `imbalance` (lower is better). For example, the map on throughput
# over the same axes:

# %%
sweep.winner_map(metric="throughput")

# %% [markdown]
# `sweep.winner_map("rate,servers.1.speed", metric="p99.9")` swaps or picks axes
# (`sweep.axes` lists them); every call below takes the same two arguments.
#
# ## The margin to the runner-up
#
# Each cell's lead, in per cent of the runner-up's mean, one bar per cell, largest on
# top, coloured by the best strategy and hatched where unresolved. The dotted line is
# 50 %, where the map's colour is full. A lead of a few per cent on a hatched bar is no
# win: the seeds alone move the figures that much.

# %%
sweep.margins()

# %% [markdown]
# ## Where the seeds disagree
#
# The unresolved cells: each seed's best strategy there, and the best's and runner-up's
# range over the seeds. More seeds (`seeds = N` in the sweep file) settle a cell, or
# show that the two strategies are as good as each other there.

# %%
sweep.disagreements()

# %% [markdown]
# ## The cells, as a table
#
# Per cell: the best and its mean, the runner-up and its mean, the margin (a fraction of
# the runner-up's mean), and why a cell is unresolved.

# %%
sweep.cells()

# %% [markdown]
# ## Measured against simulated
#
# The cells `lblab sweep ... --live-check N` ran live on this machine's testbed: the
# simulated best against its runner-up, each measured and simulated with the same
# servers, load, seed and request count; whether the measured best is the simulated
# one; and the worst verdict of the live run's own checks (a `fail` there: do not trust
# that measurement). Each run is in `live-check/<cell>/run`.

# %%
sweep.live()

# %% [markdown]
# ## Every point
#
# All rows of `sweep.parquet`: one per point (axes, strategy, seed), with its figures,
# the worker it ran on, its wall time and its error. In pandas:
# `pandas.read_parquet(f"{RESULTS}/sweep.parquet")`.

# %%
sweep.table()
