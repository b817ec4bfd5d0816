"""Server flags are checked once, with messages that name the flag and the fix."""

from __future__ import annotations

import math
import re
import subprocess

import pytest

from lblab.errors import ConfigError
from lblab.procs import lblab_command
from lblab.servers.server import ServerConfig


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"id": "s 1"}, "--id: 's 1' is not an id; give 1-64 letters, digits"),
        ({"id": "x" * 65}, "is not an id"),
        ({"port": 70000}, "--port 70000 is not a TCP port"),
        ({"cpu_quota": 0.0}, "--cpu-quota: 0.0 must be 0.01 or more"),
        ({"cpu_quota": 1000.0}, "--cpu-quota: 1000.0 must be at most"),
        ({"cpu_quota": math.nan}, "--cpu-quota: nan is not a finite number"),
        ({"max_inflight": 0}, "--max-inflight: 0 must be 1 or more"),
        ({"max_inflight": 10**6 + 1}, "--max-inflight: 1000001 must be at most 1000000"),
        ({"workers": 0}, "--workers 0 must be in 1..--max-inflight (32)"),
        ({"workers": 40}, "--workers 40 must be in 1..--max-inflight (32) and at most 1024"),
        (
            {"workers": 1025, "max_inflight": 2000},
            "--workers 1025 must be in 1..--max-inflight (2000) and at most 1024",
        ),
        ({"delay_ms": -1.0}, "--delay-ms: -1.0 must be 0 or more"),
        ({"delay_ms": math.inf}, "--delay-ms: inf is not a finite number"),
        ({"delay_dist": "normal"}, "--delay-dist 'normal': use one of fixed, exp"),
        ({"drain_timeout_s": 0.0}, "--drain-timeout: 0.0 must be above 0"),
        ({"drain_timeout_s": math.nan}, "--drain-timeout: nan is not a finite number"),
    ],
)
def test_bad_flags_name_the_flag(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        ServerConfig(**{"id": "s1", **fields})  # type: ignore[arg-type]


def test_the_command_line_turns_a_bad_flag_into_exit_code_2() -> None:
    result = subprocess.run(
        lblab_command("server", "--id", "s1", "--port", "0", "--cpu-limit", "magic"),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert "--cpu-limit 'magic': use one of auto, cgroup, duty-cycle" in result.stderr
