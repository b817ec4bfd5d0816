"""The composition root: the one place that picks a testbed driver for an experiment
(``testbeds``), the experiment service (``service``) and the ``lblab run`` command
(``cli``). Below it, ``experiment/`` owns the experiment and knows no driver;
``loadtests/`` (Locust, live processes) and ``simulator/`` (SimPy) are the drivers."""
