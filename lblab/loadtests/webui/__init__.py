"""``lblab ui``: the local testbed driven from Locust's web UI.

``session`` (the ``lblab ui`` process) starts the testbed and one Locust with its web UI
on ``locustfile``; the scenario, load model and strategy are Locust custom arguments
(``choices``) shown in the UI's form. Each swarm is a phase of the run: the Locust
process switches the strategy through the balancer's admin API, records the requests
into the phase's folder and notes the phase in ``raw/ui/phase-NNN.json``; the session
turns those notes into the manifest's phases and the run's tables with the runner's own
code (``loadtests.runner``), and writes the report when it is stopped.
"""
