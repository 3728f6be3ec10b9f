"""A cheap closed-loop HTTP/1.1 load generator for the control-plane benchmarks.

httpx costs about 3 ms of client CPU per request, more than the server it measures, and on a
2-core machine the client then decides the result. This one writes pre-built request bytes
on keep-alive connections (one per simulated client) and parses only the status line and
``Content-Length`` of each answer, on uvloop when it is installed. It speaks exactly what the
benchmarks need: no chunked bodies, no redirects, no TLS.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

try:
    import uvloop
except ImportError:  # pragma: no cover - uvicorn[standard] brings it
    uvloop = None  # type: ignore[assignment]


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    json_body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


RequestMaker = Callable[[int, int], Request]
"""(client index, request number of that client) -> the request to send."""


def encode(request: Request, host: str, common: dict[str, str]) -> bytes:
    body = b"" if request.json_body is None else json.dumps(request.json_body).encode()
    lines = [f"{request.method} {request.path} HTTP/1.1", f"Host: {host}"]
    lines += [f"{name}: {value}" for name, value in {**common, **request.headers}.items()]
    if request.json_body is not None:
        lines.append("Content-Type: application/json")
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
            break
    body = await reader.readexactly(length) if length else b""
    return status, body


async def _run(
    targets: list[tuple[str, int]],
    make_request: RequestMaker,
    clients: int,
    seconds: float,
    headers: dict[str, str],
) -> dict[str, Any]:
    latencies: list[float] = []
    statuses: collections.Counter[int] = collections.Counter()
    stop_at = time.perf_counter() + seconds

    async def client(index: int) -> None:
        host, port = targets[index % len(targets)]  # clients spread evenly over the servers
        host_header = f"{host}:{port}"
        reader, writer = await asyncio.open_connection(host, port)
        count = 0
        try:
            while time.perf_counter() < stop_at:
                payload = encode(make_request(index, count), host_header, headers)
                started = time.perf_counter()
                writer.write(payload)
                status, _ = await _read_response(reader)
                latencies.append(time.perf_counter() - started)
                statuses[status] += 1
                count += 1
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    began = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(clients)))
    elapsed = time.perf_counter() - began
    latencies.sort()

    def pct(q: float) -> float:
        return round(1000 * latencies[min(int(q * len(latencies)), len(latencies) - 1)], 2)

    return {
        "requests": len(latencies),
        "per_s": round(len(latencies) / elapsed, 1),
        "p50_ms": pct(0.50),
        "p99_ms": pct(0.99),
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
    }


def run_load(
    url: str | Sequence[str],
    make_request: RequestMaker,
    clients: int,
    seconds: float,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    """``clients`` closed loops against ``url`` (``http://host:port``, or several: client i
    uses ``url[i % len(url)]``) for ``seconds``: requests/s, p50/p99 latency in ms and the
    count of each status code."""
    targets = [_host_port(one) for one in ([url] if isinstance(url, str) else url)]
    coroutine = _run(targets, make_request, clients, seconds, headers or {})
    if uvloop is not None:
        return uvloop.run(coroutine)
    return asyncio.run(coroutine)


def _host_port(url: str) -> tuple[str, int]:
    host, _, port = url.removeprefix("http://").rstrip("/").partition(":")
    return host, int(port or 80)
