"""lblab: a research harness for load-balancing algorithms on RSocket."""

__version__ = "0.1.0"
