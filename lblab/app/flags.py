"""The config layer a command's flags make: ``lblab run``'s, and the ``lblab simulate``
flags that say the same (``app/simulate.py``)."""

from __future__ import annotations

from typing import Any

from lblab.config import parse_names


def flags_layer(**flags: Any) -> dict[str, Any]:
    """The config layer ``lblab run``'s flags make, by their names there (only the flags
    given: a missing or None one is not in it)."""
    layer: dict[str, Any] = {}

    def put(section: str, key: str, value: Any) -> None:
        if value is not None:
            layer.setdefault(section, {})[key] = value

    for key in ("strategies", "scenarios"):
        names = parse_names(flags.get(key))
        if names:
            put("run", key, names)
    for key in (
        "duration", "warmup", "replications", "seed", "locust_workers", "locust_master_bind",
        "expect_workers", "out",
    ):  # fmt: skip
        put("run", key, flags.get(key))
    put("load", "users", flags.get("users"))
    put("testbed", "kind", flags.get("testbed"))
    put("testbed", "balancer", flags.get("balancer"))
    put("testbed", "admin", flags.get("admin"))
    return layer
