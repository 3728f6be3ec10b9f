"""The read-only dashboard: one HTML page plus its static assets.

Auth: the page itself holds no data. Its script asks for an API token in a login form, keeps it
in ``sessionStorage`` (per tab, gone when the tab closes) and calls the JSON API with an
``Authorization: Bearer`` header, exactly like the CLI. We chose this over a ``?token=`` to
cookie exchange because a token in a URL leaks into shell history, proxy logs and the
``Referer`` header, and a cookie would make the JSON API open to cross-site requests. The
risk that remains for sessionStorage is script injection, so the page is served with a strict
Content-Security-Policy (scripts only from this origin, no inline script) and the script
writes data with ``textContent`` only.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse, HTMLResponse

HERE = Path(__file__).resolve().parent
STATIC_DIR = HERE / "static"
CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "form-action 'none'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
    )
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
STATIC_TYPES = {".js": "text/javascript", ".css": "text/css"}
STATIC_FILES = {
    "dashboard.js",
    "dashboard.css",
    "vendor/uPlot.iife.min.js",
    "vendor/uPlot.min.css",
}
"""An explicit list, so no request path can reach outside the static folder."""

router = APIRouter(include_in_schema=False)


def _version() -> str:
    try:
        return version("jigsaw-scheduler")
    except PackageNotFoundError:
        return "dev"


@router.get("/", response_class=HTMLResponse)
def dashboard_page() -> HTMLResponse:
    html = (HERE / "index.html").read_text(encoding="utf-8").replace("{{version}}", _version())
    headers = {**SECURITY_HEADERS, "Cache-Control": "no-store"}
    return HTMLResponse(html, headers=headers)


@router.get("/dashboard/static/{asset:path}")
def dashboard_asset(asset: str) -> FileResponse:
    if asset not in STATIC_FILES:
        raise HTTPException(status_code=404, detail=f"no dashboard asset named {asset!r}")
    path = STATIC_DIR / asset
    headers = {**SECURITY_HEADERS, "Cache-Control": "public, max-age=300"}
    return FileResponse(path, media_type=STATIC_TYPES[path.suffix], headers=headers)
