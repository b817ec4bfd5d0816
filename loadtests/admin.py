"""A client for the balancer's admin HTTP API (DESIGN contract), with a deadline per call.

``PUT /strategy`` swaps the strategy with fresh state between phases; ``POST /backends``
and ``DELETE /backends/<id>`` are the scaling events of a timeline; ``GET /status``
tells which backends the balancer sees.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any


class AdminError(RuntimeError):
    """The admin API refused a call or could not be reached."""


class AdminClient:
    def __init__(self, host: str, port: int, timeout: float = 5.0) -> None:
        self.base = f"http://{host}:{port}"
        self.timeout = timeout

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json"} if data is not None else {},
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
        return self._call("DELETE", f"/backends/{backend_id}")
