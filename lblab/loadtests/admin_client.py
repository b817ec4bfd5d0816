"""A client for the balancer's admin HTTP API (``balancer/admin.py``; docs/guides/parts.md), with a deadline per call.

``PUT /strategy`` swaps the strategy with fresh state between phases; ``POST /backends``
and ``DELETE /backends/<id>`` are the scaling events of a timeline; ``GET /status``
tells which backends the balancer sees. A balancer started with ``--admin-token`` wants
that token on every change; it is taken from ``LBLAB_ADMIN_TOKEN`` unless given, so a
local testbed (whose balancer inherits the environment) and an external one both work.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from typing import Any


class AdminError(RuntimeError):
    """The admin API refused a call or could not be reached."""


class AdminClient:
    def __init__(
        self, host: str, port: int, timeout: float = 5.0, token: str | None = None
    ) -> None:
        self.base = f"http://{host}:{port}"
        self.timeout = timeout
        self.token = token or os.environ.get("LBLAB_ADMIN_TOKEN") or None

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(
            self.base + path, data=data, method=method, headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                text = response.read().decode() or "null"
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:300]
            raise AdminError(f"{method} {path} -> HTTP {exc.code}: {detail}") from exc
        except (urllib.error.URLError, OSError) as exc:
            raise AdminError(f"{method} {self.base}{path} failed: {exc}") from exc
        try:
            return json.loads(text)
        except ValueError:
            return text

    def set_strategy(self, name: str, options: Mapping[str, str] | None = None) -> Any:
        return self._call("PUT", "/strategy", {"name": name, "options": dict(options or {})})

    def status(self) -> Any:
        return self._call("GET", "/status")

    def add_backend(self, backend_id: str, address: str, weight: float = 1.0) -> Any:
        return self._call(
            "POST", "/backends", {"id": backend_id, "address": address, "weight": weight}
        )

    def remove_backend(self, backend_id: str) -> Any:
        return self._call("DELETE", f"/backends/{urllib.parse.quote(backend_id, safe='')}")
