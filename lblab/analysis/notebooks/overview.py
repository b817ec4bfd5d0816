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
# Parameters: the results directory. `lblab notebooks RESULTS_DIR` injects it in the
# next cell; run by hand, set LBLAB_RESULTS (a folder written by `lblab run` or
# `lblab simulate`).
import os

from lblab.analysis.report import charts, tables, views

RESULTS = os.environ.get("LBLAB_RESULTS", "results/latest")

# %% [markdown]
# # Overview: which algorithm wins where
#
# One run of the harness: the balancer spread the same request matrix (package size x
# work volume, as in the thesis) over servers of unequal CPU capacity, once per
# strategy. This notebook gives the headline: what ran, the verdict, and the
# winner of each cell. The other notebooks go deeper into one family of metrics each:
# throughput, latency, failures and CPU.

# %%
view = views.open_view(RESULTS)
view.facts()

# %% [markdown]
# ## The verdict
#
# The answer of `winners.json`, the same as the report's: each block (replication) runs
# every strategy once, and strategies are compared paired within blocks, leaving out
# the phases that failed a validity check. A cell is a winner (green, no mark: better
# than every other strategy, its 95 % interval of the paired difference excluding 0),
# a tie (blue, "=": the strategies named are equivalent within the run's margin) or
# unresolved (grey, "?": the strategy named has the best mean so far, but some pair is
# neither resolved nor equivalent; more blocks would tell).

# %%
view.verdict()

# %%
views.show(charts.winner_table(view.winners))

# %% [markdown]
# The phases the answer left out. The charts and tables of these notebooks still
# include them, marked: hatched bars, boxes and cells, dashed lines, and a dagger after
# the strategy in the tables. A marked bar may stand taller than the winner's.

# %%
view.left_out()

# %% [markdown]
# ## Summary table
#
# Mean across replications, 95 % interval in brackets. Throughput counts successful
# responses per second; latency is over successful requests only. A dagger after the
# strategy: the row includes a phase that failed a validity check (left out of the
# answer).

# %%
tables.summary_table(view.summary.pooled, view.summary.failed)

# %% [markdown]
# ## Where the requests went
#
# A weight-blind strategy splits requests evenly, so the small servers (s1, s2) get as
# much as the large one; capacity-aware strategies should send most of the work to s3.

# %%
views.show(charts.server_share(view.summary.servers_pooled, view.summary.failed))

# %%
view.notes()
