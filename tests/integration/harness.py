"""Shared plumbing for the integration tests (python3 standard library only).

Each test script starts one sample server on 127.0.0.1 port 0, reads the
port from its "listening on HOST:PORT" line, drives it with real clients and
stops it with SIGTERM, expecting a clean exit (status 0) within a few
seconds. Servers are killed whatever happens: normal exit, a failed check,
an exception, or SIGTERM/SIGINT from meson's timeout.

Exit status: 0 passed, 1 failed, 77 skipped (meson's convention).
"""

import atexit
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77
_servers = []


def log(msg):
    print(msg, flush=True)


class Failure(Exception):
    pass


def check(cond, what, detail=None):
    """Records one check; raises Failure (the test fails) if cond is false."""
    if cond:
        log(f"ok - {what}")
        return
    msg = f"FAIL - {what}"
    if detail is not None:
        msg += f"\n    {detail!r}"[:4000]
    log(msg)
    raise Failure(what)


def skip(why):
    log(f"SKIP: {why}")
    sys.exit(SKIP)


def require(*programs):
    """Skips the whole test (exit 77) unless every program is installed."""
    for p in programs:
        if shutil.which(p) is None:
            skip(f"{p} is not installed (Debian: see ./bootstrap's package list)")


def have(program):
    return shutil.which(program) is not None


def run(cmd, timeout=30, input=None):
    """Runs a client; returns CompletedProcess (text mode)."""
    return subprocess.run(cmd, input=input, capture_output=True,
                          text=not isinstance(input, bytes), timeout=timeout)


class Server:
    """A sample server process listening on 127.0.0.1 port 0."""

    def __init__(self, exe, *args, startup_timeout=15):
        self.exe = exe
        self.name = os.path.basename(exe)
        self.err = tempfile.TemporaryFile(mode="w+b")
        self.proc = subprocess.Popen([exe, "-listen", "127.0.0.1:0", *args],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=self.err)
        _servers.append(self)
        line = self._read_line(startup_timeout)
        m = re.match(r"listening on (127\.0\.0\.1):(\d+)$", line.strip())
        if not m:
            raise Failure(f"{self.name}: expected 'listening on 127.0.0.1:PORT', got {line!r}; "
                          f"stderr: {self.stderr()!r}")
        self.host, self.port = m.group(1), int(m.group(2))
        self.addr = f"{self.host}:{self.port}"
        log(f"# {self.name} pid {self.proc.pid} listening on {self.addr}")

    def _read_line(self, timeout):
        deadline = time.monotonic() + timeout
        buf = b""
        fd = self.proc.stdout.fileno()
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Failure(f"{self.name}: no 'listening on' line within {timeout} s")
            r, _, _ = select.select([fd], [], [], left)
            if r:
                chunk = os.read(fd, 4096)
                if not chunk:
                    self.proc.wait(5)
                    raise Failure(f"{self.name} exited with {self.proc.returncode} before listening; "
                                  f"stderr: {self.stderr()!r}")
                buf += chunk
        return buf.decode(errors="replace")

    def stderr(self):
        self.err.flush()
        self.err.seek(0)
        return self.err.read().decode(errors="replace")

    def alive(self):
        return self.proc.poll() is None

    def connect(self, timeout=10):
        s = socket.create_connection((self.host, self.port), timeout=timeout)
        return s

    def stop(self, timeout=10):
        """SIGTERM, then expects a clean exit (status 0) within timeout seconds."""
        if not self.alive():
            rc = self.proc.returncode
            check(False, f"{self.name} still running before shutdown", f"exit status {rc}; stderr: {self.stderr()}")
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            check(False, f"{self.name} exits within {timeout} s of SIGTERM", self.stderr())
        check(rc == 0, f"{self.name} exits with status 0 after SIGTERM", f"status {rc}; stderr: {self.stderr()}")

    def kill(self):
        if self.alive():
            self.proc.kill()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass


def _kill_all():
    for s in _servers:
        s.kill()


def _on_signal(signum, frame):
    _kill_all()
    os._exit(128 + signum)


atexit.register(_kill_all)
for _sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(_sig, _on_signal)


def main(test):
    """Runs test(exe) with the server binary from argv[1]; maps the outcome to
    an exit status."""
    if len(sys.argv) < 2:
        log(f"usage: {sys.argv[0]} PATH-TO-SERVER")
        sys.exit(2)
    exe = os.path.abspath(sys.argv[1])
    start = time.monotonic()
    try:
        test(exe)
    except Failure:
        _kill_all()
        sys.exit(1)
    except Exception:
        import traceback
        traceback.print_exc()
        _kill_all()
        log("FAIL - unexpected exception")
        sys.exit(1)
    _kill_all()
    log(f"# passed in {time.monotonic() - start:.1f} s")
    sys.exit(0)


def recv_until(sock, pred, timeout=10, limit=64 << 20):
    """Reads from sock until pred(data) is true, EOF or timeout; returns data."""
    sock.settimeout(timeout)
    deadline = time.monotonic() + timeout
    data = b""
    while not pred(data) and len(data) < limit:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            break
        except (ConnectionResetError, BrokenPipeError):
            break
        if not chunk:
            break
        data += chunk
    return data


def recv_all(sock, timeout=10):
    """Reads until EOF (or timeout)."""
    sock.settimeout(timeout)
    deadline = time.monotonic() + timeout
    data = b""
    while time.monotonic() < deadline:
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            break
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    return data


def fuzz(server, seeds, count=150, seed=1):
    """Sends `count` connections' worth of mutated seed requests (flipped,
    inserted and deleted bytes; deterministic) and reads what comes back.
    The caller then checks that the server still answers."""
    import random
    rnd = random.Random(seed)
    for _ in range(count):
        data = b""
        for _ in range(rnd.randrange(1, 6)):
            d = bytearray(rnd.choice(seeds))
            for _ in range(rnd.randrange(0, 4)):
                op, pos = rnd.randrange(3), rnd.randrange(len(d) + 1)
                if op == 0 and d:
                    d[min(pos, len(d) - 1)] = rnd.randrange(256)
                elif op == 1:
                    d[pos:pos] = bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 8)))
                elif d:
                    del d[min(pos, len(d) - 1)]
            data += bytes(d)
        s = server.connect()
        s.settimeout(0.1)
        try:
            s.sendall(data)
            s.recv(65536)
        except OSError:
            pass
        s.close()
