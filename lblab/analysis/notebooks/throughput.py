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
# # Throughput and request counts
#
# The thesis compares the number of requests each algorithm got through in a fixed
# time (figures 5.1-5.4 and A.21-A.35). In a closed load model, faster responses mean
# more requests, so request count and throughput move together; in an open model the
# count is fixed and throughput only shows what was lost.

# %%
view = views.open_view(RESULTS)
view.verdict(["throughput_rps"])

# %% [markdown]
# ## Requests sent, per cell
#
# Rows are package sizes, columns work volumes. The colour ranks the strategies
# within each cell (green best): the numbers differ by orders of magnitude between
# cells, so only the comparison inside a cell is meaningful.

# %%
views.show(charts.matrix_heatmaps(view.summary.pooled, "requests", view.summary.failed))

# %%
views.show(charts.matrix_heatmaps(view.summary.pooled, "throughput_rps", view.summary.failed))

# %% [markdown]
# ## With confidence intervals
#
# One panel per scenario, each on its own y axis (lp+lr serves tens of requests a
# second, sp+sr thousands): compare bars within a panel. Whiskers are each strategy's
# 95 % t-interval across replications. The answer pairs the strategies within blocks,
# which cancels the drift between blocks that widens these whiskers, so overlapping
# whiskers can still be a resolved difference: the verdict above says which. A hatched
# bar (a dagger in the table) includes a phase that failed a validity check, which
# the answer leaves out.

# %%
views.show(charts.comparison_bars(view.summary.pooled, "throughput_rps", view.summary.failed))

# %%
tables.summary_table(view.summary.pooled, view.summary.failed, ["requests", "ok", "throughput_rps"])

# %%
tables.replication_counts(view.summary.units, view.summary.failed)
