"""The dashboard's HTTP surface: the page, its security headers and the static whitelist.

One test (one server start) on purpose: starting a control plane is the expensive part.
"""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import ServerProcess

pytestmark = pytest.mark.integration
ASSETS = {
    "dashboard.js": "text/javascript",
    "dashboard.css": "text/css",
    "vendor/uPlot.iife.min.js": "text/javascript",
    "vendor/uPlot.min.css": "text/css",
}


def test_page_assets_and_security_headers(server: ServerProcess) -> None:
    page = httpx.get(f"{server.url}/")
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe-inline" not in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    assert "<script>" not in page.text  # no inline script: all of it loads from /dashboard
    assert 'id="login-form"' in page.text
    assert server.admin_token not in page.text

    for asset, kind in ASSETS.items():
        response = httpx.get(f"{server.url}/dashboard/static/{asset}")
        assert response.status_code == 200, asset
        assert response.headers["content-type"].startswith(kind), asset

    for path in ("../routes.py", "..%2Froutes.py", "vendor/uPlot.LICENSE", "nope.js"):
        assert httpx.get(f"{server.url}/dashboard/static/{path}").status_code == 404, path
