"""Request body limit (``JIGSAW_MAX_BODY_BYTES``): 413 before the app parses anything."""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyLimit:
    """Pure ASGI middleware. Trusts Content-Length when given; otherwise counts the stream,
    buffering at most ``max_bytes`` before handing the body on."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", ())).get(b"content-length")
        if declared is not None:
            declared = declared.strip(b" \t")
            # Digits only (RFC 9110): Python's int() would also take "-5", "+3" or "1_0".
            if not declared.isdigit():
                shown = declared.decode("latin-1")[:40]
                await self._reject(send, 400, f"Content-Length is not a number of bytes: {shown!r}")
                return
            if int(declared) > self.max_bytes:
                await self._reject(send, 413, self._message())
                return
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            body = message.get("body", b"")
            size += len(body)
            if size > self.max_bytes:
                await self._reject(send, 413, self._message())
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    def _message(self) -> str:
        return (
            f"request body is larger than {self.max_bytes} bytes "
            "(the server's JIGSAW_MAX_BODY_BYTES); send a smaller body"
        )

    @staticmethod
    async def _reject(send: Send, status: int, detail: str) -> None:
        body = json.dumps({"detail": detail}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
