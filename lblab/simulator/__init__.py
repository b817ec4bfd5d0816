"""Discrete-event simulator (SimPy) driving the balancer's own Pool and strategies.

``simulator.run.simulate(SimConfig)`` runs one replication and returns the results
tables; ``simulator.output.write_run`` writes them as a results directory;
``simulator.reproduce`` re-runs the Ingram, Cheetah and Martins experiments.
"""
