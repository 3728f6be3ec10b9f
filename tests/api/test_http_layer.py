"""Errors from the HTTP layer (docs/API.md, "Errors from the HTTP layer"): a malformed
``Content-Length`` answers JSON where the app sees it, and uvicorn's own plain-text refusal,
which the app never sees, is what the docs say it is."""

from __future__ import annotations

import socket

import pytest

from tests.api.conftest import ApiClient
from tests.conftest import ServerProcess

BODY = b'{"name": "j", "model": "mlp", "workers": 1, "iterations": 10}'


@pytest.mark.parametrize("declared", ["abc", "-5", "+3", "1_0", "1, 2", "0x10", ""])
def test_a_malformed_content_length_is_a_json_400_and_stores_nothing(
    any_api: ApiClient, declared: str
) -> None:
    headers = {
        **any_api.headers("alice"),
        "Content-Type": "application/json",
        "Content-Length": declared,
    }
    response = any_api.client.post("/api/v1/jobs", content=BODY, headers=headers)

    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.json()["detail"].startswith("Content-Length is not a number of bytes")
    assert any_api.state.store.count_jobs() == 0


def test_a_well_formed_content_length_passes(any_api: ApiClient) -> None:
    headers = {
        **any_api.headers("alice"),
        "Content-Type": "application/json",
        "Content-Length": str(len(BODY)),
    }
    response = any_api.client.post("/api/v1/jobs", content=BODY, headers=headers)
    assert response.status_code == 201, response.text


def raw_request(server: ServerProcess, head: bytes) -> bytes:
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(head + b"\r\n\r\n" + BODY)
        answer = b""
        while chunk := sock.recv(65536):  # uvicorn closes the connection after refusing
            answer += chunk
    return answer


@pytest.mark.integration
def test_uvicorn_refuses_a_malformed_content_length_itself_in_plain_text(
    server: ServerProcess,
) -> None:
    head = (
        b"POST /api/v1/jobs HTTP/1.1\r\nHost: jigsaw\r\nContent-Type: application/json\r\n"
        b"Content-Length: abc"
    )
    answer = raw_request(server, head)
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line == b"HTTP/1.1 400 Bad Request", answer
    assert b"content-type: text/plain" in rest.lower()
    assert rest.endswith(b"\r\n\r\nInvalid HTTP request received.")
