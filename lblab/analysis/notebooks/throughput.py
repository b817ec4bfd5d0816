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

from lblab.analysis import charts, tables, views

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
views.show(charts.matrix_heatmaps(view.summary.pooled, "requests"))

# %%
views.show(charts.matrix_heatmaps(view.summary.pooled, "throughput_rps"))

# %% [markdown]
# ## With confidence intervals
#
# Whiskers are 95 % t-intervals across replications. Overlapping whiskers mean the
# run cannot tell the strategies apart on this metric.

# %%
views.show(charts.comparison_bars(view.summary.pooled, "throughput_rps"))

# %%
tables.summary_table(view.summary.pooled, ["requests", "ok", "throughput_rps"])

# %%
tables.replication_counts(view.summary.units)
