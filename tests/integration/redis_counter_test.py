#!/usr/bin/env python3
"""samples/redis_counter: goroutines talk to a real redis-server via hiredis.

Starts a fresh redis-server (Debian's) on a free port, runs the sample with
2,000 goroutines x 20 rounds over 50 connections, and checks its exit
status, its "ok:" line and the server's own counts (INFO commandstats):
every SET, INCR and GET the goroutines made reached the server exactly
once. Then runs it against a port where nothing listens and against a
server killed mid-run: both must fail with status 1 and a message, not
hang. Exits 77 (skipped) without redis-server.
"""
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis(port, *cmd):
    """One command over RESP; returns the raw reply text."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        parts = [f"*{len(cmd)}\r\n"] + [f"${len(c)}\r\n{c}\r\n" for c in cmd]
        s.sendall("".join(parts).encode())
        data = b""
        s.settimeout(2)
        while True:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            data += chunk
            if data.startswith((b"+", b"-", b":")) and data.endswith(b"\r\n"):
                break
            m = re.match(rb"\$(\d+)\r\n", data)
            if m and len(data) >= m.end() + int(m.group(1)) + 2:
                break
        return data.decode()


def start_server(port, workdir):
    srv = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", workdir, "--daemonize", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            if redis(port, "PING").startswith("+PONG"):
                return srv
        except OSError:
            time.sleep(0.05)
    srv.kill()
    sys.exit("redis-server did not start")


def calls(stats, cmd):
    m = re.search(rf"cmdstat_{cmd}:calls=(\d+)", stats)
    return int(m.group(1)) if m else 0


def main():
    exe = sys.argv[1]
    if shutil.which("redis-server") is None:
        print("redis-server not installed")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as workdir:
        port = free_port()
        srv = start_server(port, workdir)
        try:
            r = subprocess.run([exe, "127.0.0.1", str(port), "2000", "20", "50"],
                               capture_output=True, text=True, timeout=120)
            if r.returncode != 0:
                sys.exit(f"redis_counter: status {r.returncode}: {r.stderr}")
            if "ok: 2000 goroutines x 20 rounds over 50 connections: counter = 40000" not in r.stdout:
                sys.exit(f"redis_counter: unexpected output {r.stdout!r}")
            stats = redis(port, "INFO", "commandstats")
            got = {c: calls(stats, c) for c in ("set", "incr", "get")}
            want = {"set": 40000, "incr": 40000, "get": 40001}  # + the final GET counter
            if got != want:
                sys.exit(f"server counted {got}, want {want}\n{stats}")
            if redis(port, "GET", "counter") != "$5\r\n40000\r\n":
                sys.exit("counter on the server is not 40000")
            # The server goes away in the middle of a run: an error, no hang.
            victim = subprocess.Popen([exe, "127.0.0.1", str(port), "20000", "1000", "20"],
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            time.sleep(0.5)
            srv.kill()
            srv.wait()
            out, err = victim.communicate(timeout=60)
            if victim.returncode != 1 or "redis" not in err:
                sys.exit(f"server killed mid-run: status {victim.returncode}, stderr {err!r}")
        finally:
            srv.kill()
            srv.wait()
        # Nothing listens: connect fails with a message.
        r = subprocess.run([exe, "127.0.0.1", str(free_port())], capture_output=True, text=True, timeout=60)
        if r.returncode != 1 or "connect" not in r.stderr:
            sys.exit(f"no server: status {r.returncode}, stderr {r.stderr!r}")
        r = subprocess.run([exe, "127.0.0.1"], capture_output=True, text=True, timeout=10)
        if r.returncode != 2 or "usage" not in r.stderr:
            sys.exit(f"missing argument: status {r.returncode}, stderr {r.stderr!r}")
    print("redis_counter: ok")


if __name__ == "__main__":
    main()
