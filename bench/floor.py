"""The floor of the extender benchmark: berth's own server stack (uvicorn with httptools and uvloop,
FastAPI, a raw route that reads the whole body) answering every verb with a fixed response: the
bytes berth itself answered for the same kind of request. What berth spends above this is the cost
of decoding the arguments, deciding and encoding the answer.

    python -m bench.floor --port 8899 --responses responses.json
"""

from __future__ import annotations

import argparse
import base64
import json

import uvicorn
import uvloop
from fastapi import FastAPI, Request, Response

VERBS = ("filter", "prioritize", "bind")


def create_app(responses: dict[str, bytes]) -> FastAPI:
    app = FastAPI(title="berth benchmark floor")

    def route(verb: str):
        body = responses[verb]

        async def endpoint(request: Request) -> Response:
            await request.body()
            return Response(body, media_type="application/json")

        endpoint.__name__ = verb
        return endpoint

    for verb in VERBS:
        app.add_api_route(f"/{verb}", route(verb), methods=["POST"])

    @app.get("/readyz")
    async def readyz() -> Response:
        return Response(b'{"ready":true}', media_type="application/json")

    return app


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.floor")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--responses", required=True, help="JSON: verb -> base64 of the response body")
    args = parser.parse_args()
    with open(args.responses, encoding="utf-8") as f:
        responses = {verb: base64.b64decode(text) for verb, text in json.load(f).items()}
    # The same settings as `berth serve` (berth.extender.serve).
    config = uvicorn.Config(
        create_app(responses),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        access_log=False,
        http="httptools",
        timeout_keep_alive=75,
    )
    uvloop.run(uvicorn.Server(config).serve())


if __name__ == "__main__":
    main()
