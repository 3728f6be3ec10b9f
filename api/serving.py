"""The HTTP server's life: take the port before anything else starts, serve, and on SIGTERM
(what systemd, Docker and Kubernetes send) or SIGINT drain and return, so the caller stops the
scheduler and exits 0 with a line saying so.

uvicorn handles both signals while it serves (stop accepting, finish requests in flight,
then shut down), and afterwards re-raises the signal it caught to the handler that was there
before. Left to Python's defaults, that re-raised SIGTERM kills the process with status 143
before the scheduler is stopped; here the handler before is one that only remembers it.
"""

from __future__ import annotations

import signal
import socket
from types import FrameType

import uvicorn
from fastapi import FastAPI

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class PortUnavailableError(RuntimeError):
    """The address cannot be bound (taken, or not an address of this machine)."""


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port``. Called before the database, the scheduler or Ray
    start, so that a port in use costs one line and leaves nothing running."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as error:
        raise PortUnavailableError(f"cannot listen on {host}:{port}: {error}") from None
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        why = error.strerror or str(error)
        raise PortUnavailableError(
            f"cannot listen on {host}:{port}: {why.lower()}; choose another port with --port "
            "or JIGSAW_PORT, or stop what holds it"
        ) from None
    return sock


def serve_until_signal(app: FastAPI, sock: socket.socket) -> str | None:
    """Serve ``app`` on ``sock`` until SIGTERM or SIGINT; the signal's name once uvicorn has
    drained, or ``None`` if it stopped for another reason."""
    received: list[int] = []
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))

    def remember(signum: int, _frame: FrameType | None) -> None:
        received.append(signum)
        server.should_exit = True  # in case it came before uvicorn took the signals over

    previous = {sig: signal.signal(sig, remember) for sig in STOP_SIGNALS}
    try:
        server.run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)  # a second signal while the scheduler stops: default
        sock.close()
    return signal.Signals(received[0]).name if received else None
