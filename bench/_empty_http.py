"""The HTTP framework's own cost, for bench/registry.py: a Starlette app whose one route answers
`{}`, served on uvloop by the uvicorn set-up the registry uses (`moldau.http_server`). Prints
`port N` once it listens; runs until killed."""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path

import uvloop
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from moldau.http_server import start_http_server
from moldau.registry.app import CONTENT_TYPE


async def empty(request: Request) -> Response:
    return Response(b"{}", media_type=CONTENT_TYPE)


async def serve() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    sock.setblocking(False)
    server = await start_http_server(Starlette(routes=[Route("/", empty)]), sock)
    print(f"port {sock.getsockname()[1]}", flush=True)
    await server.main_loop()


if __name__ == "__main__":
    uvloop.install()
    asyncio.run(serve())
