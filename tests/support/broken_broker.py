"""A small deliberately broken Kafka server, for testing that ``kafkawire fuzz`` finds what it must.

It advertises ApiVersions, Metadata and ListGroups, answers every request it can read with a
default-valued response of the right version, closes the connection on one it cannot read, and has
one defect, chosen by name:

- ``truncated``: Metadata responses lose their last bytes;
- ``correlation``: Metadata responses carry the wrong correlation id;
- ``hang``: Metadata requests are never answered (the connection stays open);
- ``crash``: the first Metadata request stops the server (every connection closed, no more accepted);
- ``none``: no defect.
"""
from __future__ import annotations

import socket
import struct
import threading

from kafkawire import messages as m
from kafkawire.errors import DecodeError
from kafkawire.framing import encode_response, read_request

ADVERTISED = {18: (0, 4), 3: (0, 13), 16: (0, 5)}
DEFECTS = ("truncated", "correlation", "hang", "crash", "none")


class BrokenBroker:
    def __init__(self, defect: str):
        if defect not in DEFECTS:
            raise ValueError(f"defect {defect!r}: one of {DEFECTS}")
        self.defect = defect
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._threads: list[threading.Thread] = []
        self._open: list[socket.socket] = []
        self._stopping = False

    def __enter__(self) -> "BrokenBroker":
        thread = threading.Thread(target=self._accept, daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def __exit__(self, *exc) -> None:
        self._stopping = True
        self.listener.close()
        for sock in self._open:
            try:
                sock.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while not self._stopping:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            self._open.append(sock)
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        try:
            while True:
                frame = _read_frame(sock)
                if frame is None:
                    return
                answer = self._answer(frame)
                if answer is None:
                    return  # close: an unreadable request
                if answer:
                    sock.sendall(answer)
        except OSError:
            return
        finally:
            sock.close()

    def _answer(self, frame: bytes) -> bytes | None:
        try:
            header, _body, _ = read_request(frame)
        except DecodeError:
            return None
        key, version = header.request_api_key, header.request_api_version
        low, high = ADVERTISED.get(key, (0, -1))
        if not low <= version <= high:
            return None
        if key == 18:
            body = m.ApiVersionsResponse(api_keys=[m.ApiVersionsResponse.ApiVersion(
                api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in sorted(ADVERTISED.items())])
        else:
            body = m.api(key).response_class()
        correlation = header.correlation_id
        if key == 3 and self.defect == "hang":
            return b""
        if key == 3 and self.defect == "crash":
            self.__exit__()
            return None
        if key == 3 and self.defect == "correlation":
            correlation += 1
        data = encode_response(key, version, correlation, body)
        if key == 3 and self.defect == "truncated":
            data = struct.pack(">i", len(data) - 4 - 2) + data[4:-2]
        return data


def _read_frame(sock: socket.socket) -> bytes | None:
    head = _exactly(sock, 4)
    if head is None:
        return None
    size = struct.unpack(">i", head)[0]
    if not 0 <= size <= 1 << 20:
        return None
    return _exactly(sock, size)


def _exactly(sock: socket.socket, n: int) -> bytes | None:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)
