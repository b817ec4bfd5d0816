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
# # Failures
#
# A request fails with a timeout, a rejection (overloaded or draining server, or no
# backend at the balancer), a lost connection, an application error, or something
# else. The thesis reports the failure rate per cell; here it is also split by kind,
# since a rejection replayed elsewhere costs little and a timeout costs the user.
# A hatched bar or cell (a dagger in the table) includes a phase that failed a validity
# check, which the answer leaves out.

# %%
view = views.open_view(RESULTS)
view.verdict(["failure_rate"])

# %%
views.show(charts.matrix_heatmaps(view.summary.pooled, "failure_rate", view.summary.failed))

# %%
views.show(charts.failure_kinds(view.summary.pooled, view.summary.failed))

# %%
views.show(charts.comparison_bars(view.summary.pooled, "failure_rate", view.summary.failed))

# %%
tables.summary_table(view.summary.pooled, view.summary.failed, views.metrics_of("failure"))
