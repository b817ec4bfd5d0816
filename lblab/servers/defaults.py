"""A server's defaults that other parts rely on: ``lblab server``'s flags take them, and
the simulated testbed (``simulator/simulated_testbed.py``) models a server with them. A module
of its own, with no imports, so that neither pays for the server's event loop."""

DEFAULT_MAX_INFLIGHT = 32
"""Requests admitted at once (queued plus in service) unless ``--max-inflight`` says;
one more is REJECTED."""
DRAIN_TIMEOUT_S = 8.0
"""On SIGTERM, how long in-flight requests get to finish before the process exits."""
