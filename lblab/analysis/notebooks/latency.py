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
# # Latency
#
# Latency is measured at the load generator over successful requests (a failure's
# latency says how fast it failed, not how fast the system served). The thesis shows
# the mean per cell and the distribution per server (figures 5.8, A.36-A.40); the tail
# (p95, p99) is where a bad pick shows first: a request queued behind a small, busy
# server.

# %%
view = views.open_view(RESULTS)
view.verdict(views.metrics_of("latency"))

# %%
views.show(charts.matrix_heatmaps(view.summary.pooled, "latency_mean_ms", view.summary.failed))

# %%
views.show(charts.matrix_heatmaps(view.summary.pooled, "latency_p95_ms", view.summary.failed))

# %% [markdown]
# ## Percentile curves
#
# Each line is one strategy; the x axis stretches the tail (p90, p99, p99.9). Lines
# that part only at the right end differ in their worst requests, not their typical
# ones. A dashed line (a hatched bar or box, a dagger in the table) includes a phase
# that failed a validity check, which the answer leaves out.

# %%
views.show(charts.latency_percentiles(view.summary.curves, view.summary.failed))

# %% [markdown]
# ## By server
#
# Boxes are quartiles, whiskers the 5th and 95th percentiles, the dot the mean. A
# strategy that loads the small servers as much as the large one shows taller boxes on
# s1 and s2.

# %%
views.show(charts.latency_by_server(view.summary.boxes, view.summary.failed))

# %%
views.show(charts.comparison_bars(view.summary.pooled, "latency_p95_ms", view.summary.failed))

# %%
tables.summary_table(view.summary.pooled, view.summary.failed, views.metrics_of("latency"))
