"""A one-shot loopback server that sends exact bytes: for answers no HTTP library would write
(a malformed header line, a close-delimited body cut by an interrupt)."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator


@contextlib.contextmanager
def raw_server(respond: Callable[[socket.socket], None], *, connections: int = 1) -> Iterator[str]:
    """Serve ``connections`` connections on 127.0.0.1, each answered by ``respond(conn)`` after
    the request head has arrived; yields the base URL (``http://127.0.0.1:PORT/v1``)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(connections)
    port = listener.getsockname()[1]

    def serve() -> None:
        for _ in range(connections):
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                head, _, rest = data.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                while len(rest) < length:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    rest += chunk
                with contextlib.suppress(OSError):
                    respond(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        listener.close()
        thread.join(5)
