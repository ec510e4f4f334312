#!/usr/bin/env python3
"""samples/backend: HTTP handlers that call PostgreSQL (libpq) and Redis
(hiredis) in blocking style, on goroutines.

Starts a fresh redis-server and a throwaway PostgreSQL (initdb into a
temporary directory, trust authentication on 127.0.0.1; as root the server
runs as the postgres user), then the sample. Checks cache-aside with curl
(a miss, then a hit, a PUT that drops the cached entry, 404, 400, 405),
puts load on it with wrk (no errors, no non-2xx answers) while counting the
sample's OS threads (at most 8), stops the database under it (503, not a
hang), and SIGTERM (a clean exit). Exits 77 (skipped) without redis-server,
PostgreSQL, curl or wrk.
"""
import glob
import json
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time

import harness
from harness import check, log


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, what, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise harness.Failure(f"{what} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise harness.Failure(f"{what} did not listen within {timeout} s")


class Postgres:
    """initdb into a temporary directory, then postgres on a free port."""

    def __init__(self):
        bins = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        if not bins:
            harness.skip("PostgreSQL is not installed (Debian: postgresql)")
        bindir = os.path.dirname(bins[-1])
        self.dir = tempfile.mkdtemp(prefix="gort-pg.")
        demote = None
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)

            def demote():
                os.setgroups([])
                os.setgid(pw.pw_gid)
                os.setuid(pw.pw_uid)
        data = os.path.join(self.dir, "data")
        r = subprocess.run([os.path.join(bindir, "initdb"), "-D", data, "-A", "trust", "-U", "postgres",
                            "--no-sync", "-E", "UTF8"], capture_output=True, text=True, preexec_fn=demote)
        if r.returncode != 0:
            raise harness.Failure("initdb failed: " + r.stderr[-2000:])
        self.port = free_port()
        self.proc = subprocess.Popen(
            [os.path.join(bindir, "postgres"), "-D", data, "-p", str(self.port), "-k", self.dir,
             "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=200"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=demote)
        wait_port(self.port, self.proc, "postgres")
        pidfile = os.path.join(data, "postmaster.pid")
        for _ in range(3000):
            try:
                with open(pidfile) as f:
                    if "ready" in f.read():
                        break
            except OSError:
                pass
            time.sleep(0.01)
        self.conninfo = f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(2)  # fast shutdown
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def curl(*args):
    r = harness.run(["curl", "-s", "-i", "--max-time", "10", *args])
    # Text mode: the header lines end in "\n" here.
    head, _, body = r.stdout.replace("\r\n", "\n").partition("\n\n")
    lines = head.split("\n")
    status = int(lines[0].split()[1]) if lines and lines[0].startswith("HTTP/") else 0
    headers = {l.split(":", 1)[0].lower(): l.split(":", 1)[1].strip() for l in lines[1:] if ":" in l}
    return status, headers, body


def threads_of(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return -1


def test(exe):
    harness.require("redis-server", "curl", "wrk")
    pg = Postgres()
    redis_port = free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(redis_port, redis, "redis-server")
        srv = harness.Server(exe, "-pg", pg.conninfo, "-redis", f"127.0.0.1:{redis_port}", "-procs", "2",
                             "-pool", "8")
        base = f"http://{srv.addr}"

        st, h, body = curl(f"{base}/items/42")
        check(st == 200 and h.get("x-cache") == "miss", "first GET of an item is a cache miss", (st, h, body))
        check(json.loads(body) == {"id": 42, "name": "item 42", "price": 420}, "the item from PostgreSQL", body)
        st, h, body = curl(f"{base}/items/42")
        check(st == 200 and h.get("x-cache") == "hit", "second GET is a cache hit", (st, h))
        check(json.loads(body)["price"] == 420, "the cached item", body)
        st, _, _ = curl("-X", "PUT", f"{base}/items/42?name=gizmo&price=7")
        check(st == 204, "PUT stores the item", st)
        st, h, body = curl(f"{base}/items/42")
        check(st == 200 and h.get("x-cache") == "miss" and json.loads(body) == {"id": 42, "name": "gizmo", "price": 7},
              "PUT dropped the cached entry; the new item comes from PostgreSQL", (st, h, body))
        st, _, _ = curl(f"{base}/items/999999")
        check(st == 404, "no such item: 404", st)
        st, _, _ = curl(f"{base}/items/x")
        check(st == 400, "bad id: 400", st)
        st, h, _ = curl("-X", "DELETE", f"{base}/items/1")
        check(st == 405 and h.get("allow") == "GET, PUT", "DELETE: 405 with Allow", (st, h))

        # Load: a spread of items, so that both paths run.
        lua = os.path.join(tempfile.mkdtemp(prefix="gort-wrk."), "items.lua")
        with open(lua, "w") as f:
            f.write("counter = 0\nrequest = function()\n  counter = counter + 1\n"
                    "  return wrk.format(nil, '/items/' .. (counter % 500 + 1))\nend\n")
        peak = [0]
        stop = [False]

        def sample():
            while not stop[0]:
                peak[0] = max(peak[0], threads_of(srv.proc.pid))
                time.sleep(0.005)
        import threading
        sampler = threading.Thread(target=sample)
        sampler.start()
        r = harness.run(["wrk", "-t2", "-c64", "-d2s", "-s", lua, base + "/"], timeout=60)
        stop[0] = True
        sampler.join()
        log(r.stdout)
        check(r.returncode == 0 and "Non-2xx" not in r.stdout and "Socket errors" not in r.stdout,
              "wrk: every answer 2xx, no socket errors", r.stdout)
        st, _, body = curl(f"{base}/stats")
        stats = json.loads(body)
        check(stats["hits"] > 0 and stats["misses"] > 0, "the load went through the cache and the database", stats)
        check(0 < peak[0] <= 8, "at most 8 OS threads under load (the blocking calls park goroutines)", peak[0])

        # The database goes away: handlers answer 503 (or a cached item),
        # nothing hangs.
        pg.stop()
        st, _, _ = curl(f"{base}/items/777")
        check(st == 503, "PostgreSQL gone: 503", st)
        srv.stop()
        check("hits" in srv.proc.stdout.read().decode(), "the closing summary line")
    finally:
        redis.kill()
        pg.stop()


if __name__ == "__main__":
    harness.main(test)
