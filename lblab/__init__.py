"""lblab: a research harness for load-balancing algorithms on RSocket."""

from lblab import compiled

__version__ = "0.1.0"

compiled.install()  # the per-request path as compiled by scripts/compile, when it is current
