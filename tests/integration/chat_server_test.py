#!/usr/bin/env python3
"""Integration test for samples/chat_server, with Python socket clients:
two users see each other's messages, joins and leaves; guest names, taken
names, /who, long lines; a client that stops reading is dropped while the
others keep chatting; 50 clients get a broadcast; shutdown says goodbye."""

import socket
import threading
import time

import harness
from harness import check


class Client:
    def __init__(self, server, name, rcvbuf=None):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(10)
        self.sock.connect((server.host, server.port))
        self.buf = b""
        if name is not None:
            self.send(name)

    def send(self, line):
        self.sock.sendall(line.encode() + b"\n")

    def line(self, timeout=10):
        """The next line (without "\\n"), or None at EOF/timeout."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except (socket.timeout, ConnectionResetError):
                return None
            if not chunk:
                return None
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line.decode(errors="replace")

    def wait_for(self, pred, timeout=10):
        """Reads lines until one satisfies pred; returns it (None if none did)."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            line = self.line(max(left, 0))
            if line is None or pred(line):
                return line

    def close(self):
        self.sock.close()


def test(exe):
    server = harness.Server(exe, "-client-buffer", "64")

    alice = Client(server, "alice")
    w = alice.line()
    check(w == "*** welcome, alice! online: alice", "alice joins and is welcomed", w)
    bob = Client(server, "bob")
    w = bob.line()
    check(w == "*** welcome, bob! online: alice, bob", "bob joins and sees alice online", w)
    check(alice.line() == "*** bob has joined", "alice sees bob join")

    bob.send("hello from bob")
    check(alice.line() == "bob: hello from bob", "alice gets bob's message")
    alice.send("hi bob")
    check(bob.line() == "alice: hi bob", "bob gets alice's message")
    check(alice.line(0.3) is None, "no echo of your own messages")

    guest = Client(server, "")
    w = guest.line()
    check(w is not None and w.startswith("*** welcome, guest"), "an empty nickname becomes guestN", w)
    gname = w.split(",")[1].split("!")[0].strip()
    check(alice.line() == f"*** {gname} has joined" and bob.line() == f"*** {gname} has joined",
          "both see the guest join")
    twin = Client(server, "alice")
    w = twin.line()
    check(w is not None and w.startswith("*** welcome, alice_"), "a taken name gets a suffix", w)
    twin_name = w.split(",")[1].split("!")[0].strip()
    for c in (alice, bob, guest):
        c.wait_for(lambda l: "has joined" in l)
    alice.send("/who")
    w = alice.line()
    check(w == f"*** online: alice, bob, {gname}, {twin_name}", "/who lists everyone", w)

    # A long line is cut at 4 KiB; the rest of it is dropped, not sent as
    # another message.
    alice.send("y" * 10000)
    alice.send("after the long line")
    w = bob.line()
    check(w == "alice: " + "y" * 4096, "a 10 KB line arrives cut to 4096 bytes", (len(w or ""), (w or "")[:60]))
    check(bob.line() == "alice: after the long line", "the next line arrives intact")
    # Control characters are neutralised.
    alice.sock.sendall(b"bell\x07 and esc\x1b[2J\r\n")
    check(bob.line() == "alice: bell? and esc?[2J", "control characters become '?'")

    # The two leave on different connections, served by different
    # goroutines, so their announcements may come in either order.
    for c in (twin, guest):
        c.send("/quit")
    for seen_by in (bob, alice):
        left = {seen_by.wait_for(lambda l: l.endswith("has left")) for _ in range(2)}
        check(left == {f"*** {twin_name} has left", f"*** {gname} has left"},
              f"{twin_name} and {gname} leave with /quit", left)

    # A client that stops reading (small receive buffer, never reads) is
    # dropped once its 64-message buffer and the socket buffers are full,
    # while bob, who keeps reading, gets every message. Alice paces herself
    # on bob's progress, so bob's backlog stays far below his buffer.
    carol = Client(server, "carol", rcvbuf=4096)
    check(bob.wait_for(lambda l: l == "*** carol has joined") is not None, "carol joins")
    alice.wait_for(lambda l: l == "*** carol has joined")
    payload = "z" * 4000
    sent = 0
    dropped = False
    deadline = time.monotonic() + 30
    while not dropped and time.monotonic() < deadline:
        for _ in range(32):
            alice.send(f"{sent} {payload}")
            sent += 1
        for i in range(sent - 32, sent):
            line = bob.wait_for(lambda l: l.startswith("alice: ") or "dropped" in l)
            if line is not None and "carol was dropped" in line:
                dropped = True
                line = bob.wait_for(lambda l: l.startswith("alice: "))
            if line != f"alice: {i} {payload}":
                check(False, "bob receives every message in order while carol lags", (i, (line or "")[:40]))
    check(dropped, f"carol, who never reads, is dropped (after {sent} messages)")
    check(alice.wait_for(lambda l: "carol was dropped" in l) == "*** carol was dropped (too slow)",
          "alice sees carol dropped")
    alice.send("still here?")
    check(bob.line() == "alice: still here?", "the chat goes on after the drop")
    carol.close()

    # 50 more clients; one message reaches all of them.
    crowd = [Client(server, f"user{i}") for i in range(50)]
    for c in crowd:
        c.wait_for(lambda l: l.startswith("*** welcome"))
    time.sleep(0.2)
    alice.send("hello everyone")
    got = [c.wait_for(lambda l: l.startswith("alice: ")) for c in crowd]
    check(all(g == "alice: hello everyone" for g in got), "a message fans out to 50 clients",
          [g for g in got if g != "alice: hello everyone"][:3])
    check(bob.wait_for(lambda l: l.startswith("alice: ")) == "alice: hello everyone", "bob got it too")
    for c in crowd:
        c.close()

    # Mutated input: whatever happens to those clients, the chat goes on.
    harness.fuzz(server, [b"nick\n", b"hello\n", b"/who\n", b"/quit\n", b"\xff\xfe\x00\r\n"], count=100)
    alice.send("after the fuzz")
    got = bob.wait_for(lambda l: l == "alice: after the fuzz" or "bob" in l)
    check(server.alive() and got == "alice: after the fuzz", "100 mutated clients: the chat goes on", got)

    # A client that connects but never sends a nickname does not hold up
    # shutdown; connected clients get a goodbye, then EOF.
    silent = Client(server, None)
    time.sleep(0.1)
    server.stop()
    check(bob.wait_for(lambda l: l.startswith("*** server")) == "*** server shutting down",
          "clients are told the server is shutting down")
    check(bob.line(5) is None, "then the connection is closed")
    silent.close()


if __name__ == "__main__":
    harness.main(test)
