"""A TCP proxy that a test can cut, to partition one process from a server.

A broker whose ``zookeeper.connect`` points at a proxy keeps serving its
clients while the test cuts its link to ZooKeeper: ``cut()`` closes every
proxied connection and refuses new ones (accepted and closed at once), so the
server hears nothing from that session and expires it after the session
timeout; ``restore()`` lets connections through again, and the client learns
that its session expired. Forwarding runs in a daemon thread.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading


class TcpProxy:
    """Forwards ``127.0.0.1:port`` to ``target`` until cut; ``address`` is ``host:port``."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.setblocking(False)
        self.port = self._listener.getsockname()[1]
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._peers: dict[socket.socket, socket.socket] = {}
        self._lock = threading.Lock()
        self._cut = False
        self._closed = False
        self._thread = threading.Thread(
            target=self._run, name=f"tcp-proxy-{self.port}", daemon=True
        )
        self._thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cut(self) -> None:
        """Drop every connection and refuse new ones until ``restore``."""
        with self._lock:
            self._cut = True
            for sock in list(self._peers):
                self._drop(sock)

    def restore(self) -> None:
        with self._lock:
            self._cut = False

    def close(self) -> None:
        with self._lock:
            self._closed = True
            for sock in list(self._peers):
                self._drop(sock)
        self._thread.join(5)
        self._selector.close()
        self._listener.close()

    def _run(self) -> None:
        while not self._closed:
            for key, _ in self._selector.select(0.1):
                with self._lock:
                    if key.fileobj is self._listener:
                        self._accept()
                    elif key.fileobj in self._peers:
                        self._forward(key.fileobj)  # type: ignore[arg-type]

    def _accept(self) -> None:
        try:
            client, _ = self._listener.accept()
        except BlockingIOError:
            return
        if self._cut:
            client.close()
            return
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            client.close()
            return
        for sock in (client, upstream):
            sock.setblocking(False)
            self._selector.register(sock, selectors.EVENT_READ)
        self._peers[client] = upstream
        self._peers[upstream] = client

    def _forward(self, sock: socket.socket) -> None:
        try:
            data = sock.recv(65536)
            if data:
                self._peers[sock].setblocking(True)
                self._peers[sock].sendall(data)
                self._peers[sock].setblocking(False)
                return
        except OSError:
            pass
        self._drop(sock)

    def _drop(self, sock: socket.socket) -> None:
        other = self._peers.pop(sock, None)
        for s in (sock, other):
            if s is None:
                continue
            self._peers.pop(s, None)
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(s)
            s.close()
