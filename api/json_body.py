"""Request bodies are UTF-8 JSON, and nothing else.

:class:`JsonRoute` is the route class of every ``/api/v1`` router. For a route that takes a
body it answers, before FastAPI parses anything:

- ``415`` when a non-empty body is sent with a ``Content-Type`` other than JSON;
- ``400`` when the body is not UTF-8 (``json.loads`` alone would accept UTF-16 and UTF-32);
- ``400`` when arrays and objects nest more than :data:`MAX_DEPTH` levels deep (a body of
  50,000 ``[`` would otherwise exhaust the parser's recursion and read as "not JSON");
- ``422`` when an object in the body repeats a key (``json.loads`` alone keeps the last one),
  naming the key by its path (``workers``, ``scopes.0.name``) in ``field``;

and it parses integers of more than :data:`MAX_INT_DIGITS` digits as infinity, so that a
5,000-digit ``workers`` is a ``422`` naming ``workers``, not Python's digit-limit error.
"""

from __future__ import annotations

import email.message
import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import HTTPException, Request, Response
from fastapi.routing import APIRoute

MAX_INT_DIGITS = 1000
"""Longer integer literals stand for infinity (every integer field is far below 10^1000)."""
MAX_DEPTH = 32
"""Arrays and objects nested deeper are refused (every body the API takes needs at most 3)."""


class TooDeepError(HTTPException):
    def __init__(self) -> None:
        super().__init__(
            400,
            f"the request body nests arrays or objects more than {MAX_DEPTH} levels deep "
            "(the limit); no JigSaw request needs more than a few levels",
        )


def _depth_exceeds(value: Any, limit: int) -> bool:
    """Whether ``value`` nests lists and dicts more than ``limit`` levels (iteratively: the
    check itself must not recurse)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            if depth + 1 > limit:
                return True
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)
    return False


def _bounded_int(literal: str) -> int | float:
    if len(literal) > MAX_INT_DIGITS:
        return float("-inf") if literal.startswith("-") else float("inf")
    return int(literal)


class DuplicateKeyError(HTTPException):
    """An object in the request body names one key twice; ``field`` is the key's path."""

    def __init__(self, path: tuple[str | int, ...]) -> None:
        self.field = ".".join(str(part) for part in path)
        super().__init__(
            422,
            f"the request body repeats key {self.field!r} in one object; "
            "send each key once (JSON keys must be unique)",
        )


class _KeyRepeats:
    """An ``object_pairs_hook`` that builds the dicts ``json.loads`` would, and keeps every
    dict that repeated a key (alive, so that ids stay unique) with the first such key."""

    def __init__(self) -> None:
        self.found: dict[int, tuple[dict[str, Any], str]] = {}

    def __call__(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) < len(pairs):
            self.found[id(obj)] = (obj, _first_repeat(pairs))
        return obj

    def path_in(self, value: Any) -> tuple[str | int, ...]:
        """The path of the first repeated key, in document order. An object dropped by its
        parent's repeat is not in ``value``; its parent (or an ancestor) then is."""
        stack: list[tuple[tuple[str | int, ...], Any]] = [((), value)]
        while stack:
            path, node = stack.pop()
            if isinstance(node, dict):
                hit = self.found.get(id(node))
                if hit is not None and hit[0] is node:
                    return (*path, hit[1])
                children: list[tuple[str | int, Any]] = list(node.items())
            elif isinstance(node, list):
                children = list(enumerate(node))
            else:
                continue
            stack.extend(((*path, key), child) for key, child in reversed(children))
        return (next(iter(self.found.values()))[1],)


def _first_repeat(pairs: list[tuple[str, Any]]) -> str:
    seen: set[str] = set()
    for key, _value in pairs:
        if key in seen:
            return key
        seen.add(key)
    raise ValueError("no key repeats")


def is_json_media_type(content_type: str) -> bool:
    message = email.message.Message()
    message["content-type"] = content_type
    subtype = message.get_content_subtype()
    return message.get_content_maintype() == "application" and (
        subtype == "json" or subtype.endswith("+json")
    )


class JsonRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            raw = await self.body()
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise HTTPException(
                    400,
                    f"the request body is not UTF-8 (byte {error.start}); send UTF-8 JSON",
                ) from None
            repeats = _KeyRepeats()
            try:
                value = json.loads(text, parse_int=_bounded_int, object_pairs_hook=repeats)
            except RecursionError:
                raise TooDeepError() from None
            if _depth_exceeds(value, MAX_DEPTH):
                raise TooDeepError()
            if repeats.found:
                raise DuplicateKeyError(repeats.path_in(value))
            self._json = value
        return self._json


class JsonRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        takes_body = self.body_field is not None

        async def handle(request: Request) -> Response:
            json_request = JsonRequest(request.scope, request.receive)
            if takes_body:
                content_type = request.headers.get("content-type")
                if content_type and not is_json_media_type(content_type):
                    if await json_request.body():
                        raise HTTPException(
                            415,
                            f"Content-Type {content_type!r} is not JSON; "
                            "send the body as application/json (UTF-8)",
                        )
            return await handler(json_request)

        return handle
