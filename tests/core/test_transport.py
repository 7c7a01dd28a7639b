"""The lean transport over TLS: keep-alive requests succeed with a trusted cert, an untrusted one is refused."""

from __future__ import annotations

import asyncio
import json
import shutil
import ssl
import subprocess

import httpx
import pytest

from verifier.transport import FastTransport


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while True:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
        out = json.dumps({"echo": json.loads(await reader.readexactly(length))}).encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(out), out))
        await writer.drain()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl CLI to make a throwaway certificate")
async def test_tls_keep_alive_and_verification(tmp_path):
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"],
                   check=True, capture_output=True)
    sctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    sctx.load_cert_chain(cert, key)
    connections = 0

    async def handle(r, w):
        nonlocal connections
        connections += 1
        await _echo(r, w)

    srv = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=sctx)
    port = srv.sockets[0].getsockname()[1]
    try:
        async with httpx.AsyncClient(transport=FastTransport(verify=ssl.create_default_context(cafile=str(cert)))) as c:
            for i in range(3):
                r = await c.post(f"https://localhost:{port}/v1/x", json={"i": i})
                assert r.status_code == 200 and r.json() == {"echo": {"i": i}}
        assert connections == 1  # one TLS handshake, then keep-alive
        async with httpx.AsyncClient(transport=FastTransport()) as c:
            with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await c.post(f"https://localhost:{port}/v1/x", json={})
    finally:
        srv.close()
