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
# # CPU use of each server
#
# Each agent samples its server's CPU as a percentage of that server's own allowance,
# so a 0.25-CPU server at 100 % is saturated while the 1-CPU server may idle. A
# balanced pool keeps all servers at similar percentages; the thesis plots this over
# time (figures 5.5-5.9, A.1-A.20). In a simulated run the "CPU" is the servers'
# busy fraction.

# %%
view = views.open_view(RESULTS)
view.verdict(["cpu_imbalance"])

# %% [markdown]
# ## Over time
#
# One figure per scenario, one panel per strategy, one colour per server (thin lines
# are replications). Lines that stay apart mean the strategy loads the servers
# unevenly relative to their capacity.

# %%
views.cpu_over_time(view)

# %% [markdown]
# ## Balance in one number
#
# Imbalance is the busiest server's mean CPU over the average (1 is perfect); Jain's
# index is 1 when all servers are equally loaded and 1/n when one takes everything.
# One panel per scenario, each on its own y axis. A hatched bar (a dagger in the
# tables, a dashed line over time) includes a phase that failed a validity check,
# which the answer leaves out.

# %%
views.show(charts.comparison_bars(view.summary.pooled, "cpu_imbalance", view.summary.failed))

# %%
views.show(charts.comparison_bars(view.summary.pooled, "cpu_jain", view.summary.failed))

# %%
tables.summary_table(view.summary.pooled, view.summary.failed, views.metrics_of("cpu"))

# %%
tables.summary_table(
    view.summary.servers_pooled,
    view.summary.failed,
    ["cpu_mean", "cpu_std"],
    by=("scenario", "strategy", "server"),
)
