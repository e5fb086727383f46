"""Reading a watch through the hub from a raw socket: open it, read its
chunked events until a condition holds (or the stream ends), and undo the
chunking.  Raw, so that the tests see exactly what a client gets: every
event, and whether the stream ended with its final chunk."""

import json
import socket
import time


def open_watch(hub, path, ua):
    """GET path on the hub's proxy port; (socket, response head, body bytes read so far)."""
    sock = socket.create_connection(("127.0.0.1", hub.proxy_port))
    sock.sendall(("GET %s HTTP/1.1\r\nHost: x\r\nUser-Agent: %s\r\nAccept: application/json"
                  "\r\n\r\n" % (path, ua)).encode())
    sock.settimeout(10)
    head, rest = read_head(sock)
    return sock, head, rest


def read_head(sock):
    """Read a raw HTTP response until its head has ended (or the peer
    closed); (head without the blank line, bytes that came after it)."""
    data = b""
    while b"\r\n\r\n" not in data:
        more = sock.recv(65536)
        if not more:
            break
        data += more
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def read_events(sock, rest, until, timeout):
    """Read chunked watch events until until(events) or timeout; (events, closed)."""
    buf = rest
    events = []
    deadline = time.time() + timeout
    closed = False
    sock.settimeout(0.2)
    while time.time() < deadline and not until(events):
        try:
            b = sock.recv(65536)
            if not b:
                closed = True
                break
            buf += b
        except socket.timeout:
            pass
        except OSError:
            closed = True
            break
        if closed:
            break
        if b"\r\n0\r\n\r\n" in buf or buf.startswith(b"0\r\n\r\n"):
            closed = True  # the response ended (the connection may stay open)
        events = []
        for line in dechunk(buf).split(b"\n"):
            line = line.strip()
            if line.startswith(b"{"):
                try:
                    events.append(json.loads(line))
                except ValueError:
                    pass
    return events, closed


def dechunk(data):
    out = b""
    while data:
        size, sep, rest = data.partition(b"\r\n")
        if not sep:
            break
        try:
            n = int(size.split(b";")[0], 16)
        except ValueError:
            break
        if n == 0 or len(rest) < n:
            out += rest[:n] if n else b""
            break
        out += rest[:n]
        data = rest[n + 2:]
    return out
