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
# A winner is the best mean across replications. It is *clear* only when its 95 %
# t-interval does not overlap the runner-up's; with a single replication there is no
# interval, and the table marks the win with "?".

# %%
view.verdict()

# %%
views.show(charts.winner_table(view.winners))

# %% [markdown]
# ## Summary table
#
# Mean across replications, 95 % interval in brackets. Throughput counts successful
# responses per second; latency is over successful requests only.

# %%
tables.summary_table(view.summary.pooled)

# %% [markdown]
# ## Where the requests went
#
# A weight-blind strategy splits requests evenly, so the small servers (s1, s2) get as
# much as the large one; capacity-aware strategies should send most of the work to s3.

# %%
views.show(charts.server_share(view.summary.servers_pooled))

# %%
view.notes()
