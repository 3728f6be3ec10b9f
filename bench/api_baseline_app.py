"""The baseline for bench/api_throughput.py: a bare FastAPI app doing no database work.

``POST /echo`` validates the same job body our ``POST /api/v1/jobs`` takes and returns it
(framework + JSON + validation, no auth, no SQL); ``GET /ping`` returns a constant.
"""

from __future__ import annotations

from fastapi import FastAPI, Response

from api.schemas.jobs import JobCreate

app = FastAPI()


@app.post("/echo", status_code=201)
def echo(body: JobCreate) -> Response:
    return Response(body.model_dump_json(), status_code=201, media_type="application/json")


@app.get("/ping")
def ping() -> dict[str, str]:
    return {"status": "ok"}
