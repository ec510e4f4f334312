#!/usr/bin/env python3
"""Integration test for samples/echo_server: nc (netcat-openbsd) and Python
sockets — lines, binary data, a 4 MiB transfer, half-close, 200 concurrent
clients — then a graceful shutdown with connections still open."""

import os
import random
import socket
import threading

import harness
from harness import check, log


def echo_once(server, payload, timeout=20):
    """Sends payload on a new connection, half-closes, reads until EOF."""
    s = server.connect()
    got = []

    def reader():
        got.append(harness.recv_all(s, timeout))

    t = threading.Thread(target=reader)
    t.start()
    s.sendall(payload)
    s.shutdown(socket.SHUT_WR)
    t.join()
    s.close()
    return got[0]


def test(exe):
    harness.require("nc")
    r = harness.run(["nc", "-h"])
    if "OpenBSD" not in r.stdout + r.stderr:
        harness.skip("nc is not netcat-openbsd (needs -N)")

    server = harness.Server(exe)

    # nc: lines in, the same lines out; -N sends FIN at end of input and nc
    # exits when the server closes its side in turn.
    lines = "hello\nworld\n" + "".join(f"line {i} " + "x" * i + "\n" for i in range(200))
    r = harness.run(["nc", "-N", server.host, str(server.port)], input=lines, timeout=20)
    check(r.returncode == 0 and r.stdout == lines, "nc: 202 lines echoed verbatim",
          (r.returncode, r.stdout[:200], r.stderr))

    # Binary data, every byte value.
    blob = bytes(range(256)) * 64
    check(echo_once(server, blob) == blob, "binary payload (all 256 byte values) echoed")

    # A large transfer: reading and writing at once, so neither side stalls
    # on a full socket buffer.
    big = os.urandom(4 << 20)
    check(echo_once(server, big, timeout=30) == big, "4 MiB echoed intact")

    # Half-close: after our FIN the server still sends what it has, then EOF.
    s = server.connect()
    s.sendall(b"before fin")
    s.shutdown(socket.SHUT_WR)
    data = harness.recv_all(s)
    check(data == b"before fin", "half-close: data then EOF", data)
    s.close()

    # 200 concurrent clients, each with its own random messages.
    errors = []

    def client(i):
        try:
            rnd = random.Random(i)
            s = server.connect(timeout=20)
            for _ in range(20):
                msg = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 2000)))
                s.sendall(msg)
                got = harness.recv_until(s, lambda d: len(d) >= len(msg), timeout=20)
                if got != msg:
                    errors.append((i, len(msg), len(got)))
                    break
            s.close()
        except OSError as e:
            errors.append((i, repr(e)))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    check(not errors and not any(t.is_alive() for t in threads),
          "200 concurrent clients x 20 messages echoed", errors[:5])

    # Graceful shutdown with idle connections open: they are closed (EOF).
    idle = [server.connect() for _ in range(10)]
    idle[0].sendall(b"ping")
    check(harness.recv_until(idle[0], lambda d: d == b"ping") == b"ping", "idle connections open")
    server.stop()
    check(all(harness.recv_all(s, 5) == b"" for s in idle[1:]), "open connections see EOF at shutdown")
    check("shutting down" in server.stderr(), "server says it is shutting down", server.stderr())
    log(f"# server stderr: {server.stderr().strip()}")


if __name__ == "__main__":
    harness.main(test)
