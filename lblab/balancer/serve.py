"""Running the balancer node as a process: event loop, allocator and collector tuning,
signals, ready line."""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging

from lblab import collector, compiled
from lblab.balancer.admin import start_admin
from lblab.balancer.agent_listener import start_agent_listener
from lblab.balancer.node import BalancerNode, NodeConfig
from lblab.procs import announce_ready, stop_on_signals

log = logging.getLogger("lblab.balancer")

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
ALLOCATOR_KEEP_BYTES = 256 * 1024 * 1024
"""glibc gives freed memory back to the kernel (trim, munmap) after every freed 1 MB
buffer; forwarding 1 MB frames then costs 3.9 ms instead of 1.1-1.4 ms a request in
thousands of ``brk`` calls (docs/FIELD-NOTES.md, "Speeds"). Keeping up to this much lets the
buffers be reused."""
MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
"""Serve frame buffers up to glibc's maximum threshold from the heap, not fresh mmaps."""


def tune_allocator() -> bool:
    """Stop glibc trimming the heap after each large free; False where that is not glibc."""
    name = ctypes.util.find_library("c")
    if not name:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    return bool(
        mallopt(_M_TRIM_THRESHOLD, ALLOCATOR_KEEP_BYTES)
        and mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)
    )


async def serve(config: NodeConfig) -> None:
    """Run until SIGTERM/SIGINT, then stop gracefully (``BalancerNode.close``)."""
    loop = asyncio.get_running_loop()
    node = BalancerNode(config, loop)
    await node.start()
    host = config.host
    if config.agent_port is not None:
        await node.listen(
            "agent_port", config.agent_port, lambda p: start_agent_listener(node, host, p)
        )
    if config.admin_port is not None:
        admin_host = config.admin_host
        await node.listen(
            "admin_port", config.admin_port, lambda p: start_admin(node, admin_host, p)
        )
    stop = stop_on_signals(loop)
    log.info("per-request path: %s", compiled.status())
    collector.settle()
    announce_ready(
        "balancer", **node.ports(), strategy=node.strategy.name, compiled=compiled.active()
    )
    await stop.wait()
    await node.close()


def run(config: NodeConfig) -> None:
    import uvloop

    tune_allocator()
    uvloop.run(serve(config))
