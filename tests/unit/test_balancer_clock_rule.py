"""STYLE's clock rule, for the balancer's source: no ``loop.time()``.

uvloop's ``loop.time()`` counts whole milliseconds; the balancer times requests with
``time.monotonic()`` (tests/integration/test_balancer_clock.py shows what the other one
did). A call of ``.time()`` on anything named like an event loop, anywhere under
``lblab/balancer``, is refused here so that it cannot come back one call at a time.
"""

from __future__ import annotations

import ast
from pathlib import Path

BALANCER = Path(__file__).resolve().parents[2] / "lblab" / "balancer"


def _loop_time_lines(path: Path) -> list[int]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "time"
        ):
            continue
        owner = node.func.value
        name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
        if "loop" in name.lower() or (
            isinstance(owner, ast.Call) and ast.unparse(owner.func).endswith("_loop")
        ):
            found.append(node.lineno)
    return sorted(found)


def test_the_balancer_never_reads_the_event_loops_clock() -> None:
    sources = sorted(BALANCER.rglob("*.py"))
    assert len(sources) > 20
    calls = [
        f"{path.relative_to(BALANCER.parents[1])}:{line}"
        for path in sources
        for line in _loop_time_lines(path)
    ]
    assert not calls, f"loop.time() in the balancer (use time.monotonic()): {calls}"


def test_the_rule_sees_the_forms_it_refuses(tmp_path: Path) -> None:
    source = tmp_path / "x.py"
    source.write_text(
        "import asyncio\n"
        "a = loop.time()\n"
        "b = self.wiring.loop.time()\n"
        "c = asyncio.get_running_loop().time()\n"
        "d = time.time()\n"
        "e = clock.time()\n"
    )
    assert _loop_time_lines(source) == [2, 3, 4]
