"""Design-space sweeps: many simulations (a grid of settings x strategies x seeds) run as
Dask tasks, one summary row per point, and a winner map of where each strategy wins."""
