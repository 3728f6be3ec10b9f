"""A thin httpx client for the JigSaw REST API (/api/v1), mapping failures to CLI errors."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from cli.api_words import cli_detail
from cli.config import CliConfig, config_path
from cli.errors import ApiError, ServerUnreachableError, UsageError

API = "/api/v1"
RETRY_DELAYS_S = (0.2, 0.5)
"""Transient failures (connection refused, 502/503/504) are retried this many times."""
RETRYABLE_STATUS = frozenset({502, 503, 504})
PAGE = 1000
"""The most jobs one ``GET /api/v1/jobs`` answers."""

Params = Mapping[str, str | int | Sequence[str]]

JOB_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]*")
"""What a job id may hold (the server's are ``j-`` and 12 hex digits); anything else, such as
``j-1/events`` or ``../scheduler``, would reach another route of the API."""


def _job_segment(job_id: str) -> str:
    """``job_id`` as one segment of a URL path, or a usage error naming it."""
    if JOB_ID.fullmatch(job_id) is None:
        raise UsageError(
            f"{job_id!r} is not a job id (ids look like j-0123456789ab); "
            "`jigsaw-cli list` shows your jobs"
        )
    return job_id


class JigsawClient:
    def __init__(self, config: CliConfig, *, timeout_s: float = 15.0) -> None:
        self.config = config
        headers = {"Accept": "application/json", "User-Agent": "jigsaw-cli"}
        if config.token:
            headers["Authorization"] = f"Bearer {config.token}"
        self._http = httpx.Client(base_url=config.url, headers=headers, timeout=timeout_s)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> JigsawClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- jobs ---------------------------------------------------------------------------------

    def submit(self, spec: Mapping[str, Any], idempotency_key: str) -> dict[str, Any]:
        return self._request(
            "POST",
            f"{API}/jobs",
            json=dict(spec),
            headers={"Idempotency-Key": idempotency_key},
            idempotent=True,
        )

    def validate(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        return self._request("POST", f"{API}/jobs:validate", json=dict(spec), idempotent=True)

    def list_jobs(
        self,
        *,
        states: Sequence[str] = (),
        user: str | None = None,
        queue: str | None = None,
        name: str | None = None,
        since: str | None = None,
        sort: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> dict[str, Any]:
        """A page of jobs; newest first unless ``sort`` (``name``, ``-priority``, ...) says
        otherwise. ``since``: an ISO-8601 time."""
        params: dict[str, Any] = {"limit": limit, "offset": offset}
        if states:
            params["state"] = list(states)
        # An empty filter goes to the server, which refuses it: dropping it here listed every job.
        for key, value in (
            ("user", user),
            ("queue", queue),
            ("name", name),
            ("since", since),
            ("sort", sort),
        ):
            if value is not None:
                params[key] = value
        flags = {
            name: f"--{name}"
            for name in ("state", "user", "queue", "name", "since", "sort", "limit", "offset")
        }
        return self._request("GET", f"{API}/jobs", params=params, flags=flags)

    def all_jobs(
        self, *, states: Sequence[str] = (), user: str | None = None
    ) -> list[dict[str, Any]]:
        """Every job matching, page by page (``list`` shows at most 1000)."""
        found: list[dict[str, Any]] = []
        while True:
            # Oldest first: a job submitted meanwhile lands on the last page, not shifting pages.
            page = self.list_jobs(
                states=states, user=user, sort="submitted", limit=PAGE, offset=len(found)
            )
            items = list(page.get("items", []))
            found.extend(items)
            if not items or len(found) >= int(page.get("total", 0)):
                return found

    def get_job(self, job_id: str) -> dict[str, Any]:
        return self._request("GET", f"{API}/jobs/{_job_segment(job_id)}")

    def cancel(self, job_id: str) -> dict[str, Any]:
        # Cancelling twice is harmless (the second answers 409 with the state), so retry is safe.
        return self._request("POST", f"{API}/jobs/{_job_segment(job_id)}/cancel", idempotent=True)

    def events(self, job_id: str) -> list[dict[str, Any]]:
        return list(self._request("GET", f"{API}/jobs/{_job_segment(job_id)}/events")["items"])

    def progress(self, job_id: str, after_iteration: int | None = None) -> list[dict[str, Any]]:
        params = {} if after_iteration is None else {"after_iteration": after_iteration}
        path = f"{API}/jobs/{_job_segment(job_id)}/progress"
        return list(self._request("GET", path, params=params)["items"])

    def logs(
        self,
        job_id: str,
        after: int | None = None,
        *,
        tail: int | None = None,
        since: str | None = None,
    ) -> dict[str, Any]:
        """Log lines after sequence number ``after``; the last ``tail`` of them; only those
        written at or after ``since`` (an ISO-8601 time)."""
        params: dict[str, Any] = {} if after is None else {"after": after}
        if tail is not None:
            params["tail"] = tail
        if since is not None:
            params["since"] = since
        flags = {"tail": "--tail", "since": "--since"}
        return self._request(
            "GET", f"{API}/jobs/{_job_segment(job_id)}/logs", params=params, flags=flags
        )

    # -- cluster, scheduler, tokens -------------------------------------------------------------

    def cluster(self) -> dict[str, Any]:
        return self._request("GET", f"{API}/cluster")

    def utilization(self, since: str | None = None) -> list[dict[str, Any]]:
        params = {"since": since} if since else {}
        return list(self._request("GET", f"{API}/cluster/utilization", params=params)["items"])

    def scheduler(self) -> dict[str, Any]:
        return self._request("GET", f"{API}/scheduler")

    def queue(self) -> dict[str, Any]:
        """The waiting jobs (``items``), how the policy orders them (``order``) and a note."""
        return self._request("GET", f"{API}/scheduler/queue")

    def models(self, workers: int, batch_size: int) -> dict[str, Any]:
        params = {"workers": workers, "batch_size": batch_size}
        flags = {"workers": "--workers", "batch_size": "--batch-size"}
        return self._request("GET", f"{API}/models", params=params, flags=flags)

    def create_token(self, name: str, user: str, scopes: Sequence[str]) -> dict[str, Any]:
        body = {"name": name, "user": user, "scopes": list(scopes)}
        flags = {"name": "--name", "user": "--user", "scopes": "--scope"}
        return self._request("POST", f"{API}/tokens", json=body, flags=flags)

    def list_tokens(self, include_revoked: bool) -> list[dict[str, Any]]:
        params = {"include_revoked": "true"} if include_revoked else {}
        return list(self._request("GET", f"{API}/tokens", params=params)["items"])

    def revoke_token(self, token_id: int) -> dict[str, Any]:
        # Revoking twice changes nothing, so a retry after a lost answer is safe.
        return self._request("POST", f"{API}/tokens/{token_id}/revoke", idempotent=True)

    # -- plumbing -------------------------------------------------------------------------------

    def _request(
        self,
        method: str,
        path: str,
        *,
        params: Params | None = None,
        json: Any = None,
        headers: Mapping[str, str] | None = None,
        idempotent: bool = False,
        flags: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """``flags``: the request's query parameters by the flags that set them, so that an
        error names what the user typed."""
        retry_all = method == "GET" or idempotent
        for attempt in range(len(RETRY_DELAYS_S) + 1):
            last_try = attempt == len(RETRY_DELAYS_S)
            try:
                response = self._http.request(
                    method, path, params=params, json=json, headers=headers
                )
            except httpx.ConnectError as error:
                # Nothing reached the server, so even a non-idempotent request is safe to resend.
                if last_try:
                    raise ServerUnreachableError(self.config.url, _short(error)) from error
            except httpx.TransportError as error:
                if last_try or not retry_all:
                    raise ServerUnreachableError(self.config.url, _short(error)) from error
            else:
                if response.status_code not in RETRYABLE_STATUS or last_try or not retry_all:
                    return self._decode(response, flags or {})
            time.sleep(RETRY_DELAYS_S[attempt])
        raise AssertionError("unreachable: the loop returns or raises on its last try")

    def _decode(self, response: httpx.Response, flags: Mapping[str, str]) -> dict[str, Any]:
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.is_success:
            if not isinstance(body, dict):
                raise ApiError(
                    502,
                    f"the server at {self.config.url} answered with something other "
                    "than a JSON object; is JIGSAW_URL pointing at a JigSaw server?",
                    {},
                )
            return body
        error_body = body if isinstance(body, dict) else {}
        raw_detail = error_body.get("detail")
        if isinstance(raw_detail, list):
            detail = _pydantic_detail(raw_detail)
        else:
            detail = str(raw_detail or f"HTTP {response.status_code} from {self.config.url}")
        if response.status_code == 401 and not self.config.token:
            detail = _no_token(self.config)
        said = cli_detail(response.status_code, error_body, detail, flags)
        raise ApiError(response.status_code, said, error_body, rephrased=said != detail)


def _no_token(config: CliConfig) -> str:
    """Why no token was sent, and how to send one."""
    if config.source == "JIGSAW_TOKEN":
        where = f" (unset it to use the token in {config_path()})" if config.file_token else ""
        return f"JIGSAW_TOKEN is set but empty, so no token was sent; set it to a token{where}"
    return f'no token configured; set JIGSAW_TOKEN or put token = "..." in {config.source}'


def _pydantic_detail(items: list[Any]) -> str:
    """FastAPI's default 422 body lists errors; keep the first one readable."""
    if not items or not isinstance(items[0], dict):
        return "the server rejected the request"
    first = items[0]
    location = ".".join(str(part) for part in first.get("loc", ()) if part != "body")
    return f"{location}: {first.get('msg', 'invalid')}" if location else str(first.get("msg"))


def _short(error: Exception) -> str:
    text = str(error) or type(error).__name__
    return text.splitlines()[0][:160]
