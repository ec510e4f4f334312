#!/usr/bin/env python3
"""Integration test for samples/http_server: curl (routes, keep-alive reuse,
HTTP/1.0, Connection: close, HEAD, POST echo with and without Expect:
100-continue, 404/405), raw sockets (malformed and oversized requests,
pipelining, a request split into single bytes), then a bounded wrk run.
Then the server again with -debug (debug_endpoint.hpp): the pprof index,
goroutine/block/mutex profiles, a CPU profile while a client keeps asking
for /, a JSON trace with the requests' regions, the flight recorder, a
second profile or trace at once (500, Go's text) and bad parameters (400)."""

import gzip
import http.client
import json
import os
import re
import shutil
import socket
import tempfile
import threading
import time

import harness
from harness import check, log


def curl(*args, timeout=20):
    return harness.run(["curl", "-sS", "--max-time", "15", *args], timeout=timeout)


def raw(server, data, timeout=10):
    """Sends data on a new connection and reads until the server closes it."""
    s = server.connect()
    s.sendall(data)
    got = harness.recv_all(s, timeout)
    s.close()
    return got


def parse_responses(data):
    """Splits a byte stream into (status, headers, body) responses using
    Content-Length."""
    out = []
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if not sep:
            raise ValueError(f"incomplete response head: {data[:200]!r}")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        n = int(headers.get("content-length", "0"))
        out.append((status, headers, rest[:n]))
        data = rest[n:]
    return out


def get(server, path, timeout=60):
    """One GET on a new connection: (status, lower-cased headers, body bytes)."""
    conn = http.client.HTTPConnection(server.host, server.port, timeout=timeout)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


class Hammer:
    """A client asking for / on one keep-alive connection until stopped;
    `served` counts the right answers."""

    def __init__(self, server):
        self.server, self.served, self.errors = server, 0, []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        conn = http.client.HTTPConnection(self.server.host, self.server.port, timeout=10)
        try:
            while not self.stopping.is_set():
                conn.request("GET", "/")
                r = conn.getresponse()
                if r.status == 200 and r.read() == b"Hello, World!\n":
                    self.served += 1
        except Exception as e:  # reported by stop()
            self.errors.append(repr(e))
        finally:
            conn.close()

    def stop(self):
        self.stopping.set()
        self.thread.join(15)
        return self.served


def test(exe):
    harness.require("curl")
    server = harness.Server(exe)
    base = f"http://{server.addr}"

    # Routes.
    r = curl("-w", "\n%{http_code} %{content_type}", f"{base}/")
    check(r.stdout == "Hello, World!\n\n200 text/plain; charset=utf-8", "GET / -> 200 Hello, World!",
          (r.stdout, r.stderr))
    r = curl("-w", "\n%{http_code} %{content_type}", f"{base}/json")
    body, _, tail = r.stdout.rpartition("\n")
    check(tail == "200 application/json" and json.loads(body).get("message") == "Hello, World!",
          "GET /json -> 200 application/json with a message", r.stdout)
    r = curl("-o", "/dev/null", "-w", "%{http_code}", f"{base}/no/such/page")
    check(r.stdout == "404", "GET /no/such/page -> 404", r.stdout)
    r = curl("-i", "-X", "DELETE", f"{base}/")
    check(r.stdout.startswith("HTTP/1.1 405 ") and "Allow: GET, HEAD" in r.stdout,
          "DELETE / -> 405 with Allow", r.stdout)
    r = curl("-o", "/dev/null", "-w", "%{http_code}", "-X", "BREW", f"{base}/")
    check(r.stdout == "501", "unknown method BREW -> 501", r.stdout)
    r = curl("-I", f"{base}/")
    check(r.stdout.startswith("HTTP/1.1 200 ") and "Content-Length: 14" in r.stdout,
          "HEAD / -> 200, Content-Length of the GET body", r.stdout)
    t0 = time.monotonic()
    r = curl("-w", " %{http_code}", f"{base}/sleep?ms=200")
    took = time.monotonic() - t0
    check(r.stdout == "slept 200 ms\n 200" and took >= 0.2, "GET /sleep?ms=200 sleeps and answers",
          (r.stdout, took))
    r = curl("-o", "/dev/null", "-w", "%{http_code}", f"{base}/sleep?ms=abc")
    check(r.stdout == "400", "GET /sleep?ms=abc -> 400", r.stdout)
    for path in ("/debug/pprof/", "/debug/pprof/goroutine?debug=1", "/debug/trace", "/debug/flightrecorder"):
        r = curl("-o", "/dev/null", "-w", "%{http_code}", f"{base}{path}")
        check(r.stdout == "404", f"without -debug, GET {path} -> 404", r.stdout)

    # Keep-alive: two URLs in one curl invocation share one connection.
    r = curl("-o", "/dev/null", "-o", "/dev/null", "-w", "%{num_connects} ", f"{base}/", f"{base}/json")
    check(r.stdout == "1 0 ", "keep-alive: the second request reuses the connection", r.stdout)
    r = curl("-v", "-o", "/dev/null", "-o", "/dev/null", f"{base}/", f"{base}/json")
    check(re.search(r"Re-?using existing connection", r.stderr) is not None,
          "curl -v reports the reused connection", r.stderr[-800:])
    # HTTP/1.0 without keep-alive, and Connection: close: one connection each.
    r = curl("--http1.0", "-o", "/dev/null", "-o", "/dev/null", "-w", "%{num_connects} ",
             f"{base}/", f"{base}/")
    check(r.stdout == "1 1 ", "HTTP/1.0: the server closes after each response", r.stdout)
    r = curl("-H", "Connection: close", "-o", "/dev/null", "-o", "/dev/null", "-w", "%{num_connects} ",
             f"{base}/", f"{base}/")
    check(r.stdout == "1 1 ", "Connection: close is honoured", r.stdout)

    # POST /echo: a small body, and a 300 KB one (curl sends Expect:
    # 100-continue for it and waits for the interim response).
    r = curl("-X", "POST", "--data-binary", "ping pong", "-H", "Content-Type: text/x-test",
             "-w", " %{content_type}", f"{base}/echo")
    check(r.stdout == "ping pong text/x-test", "POST /echo echoes the body and its Content-Type", r.stdout)
    with tempfile.NamedTemporaryFile() as f:
        payload = os.urandom(300 * 1024)
        f.write(payload)
        f.flush()
        t0 = time.monotonic()
        r = harness.run(["curl", "-sS", "--max-time", "15", "--data-binary", f"@{f.name}", "-H",
                         "Expect: 100-continue", f"{base}/echo"], input=b"", timeout=20)
        took = time.monotonic() - t0
    check(r.stdout == payload, "POST /echo with a 300 KB body round-trips", len(r.stdout))
    check(took < 0.9, "Expect: 100-continue answered at once (curl waits 1 s otherwise)", took)
    r = curl("-o", "/dev/null", "-w", "%{http_code}", f"{base}/echo")
    check(r.stdout == "405", "GET /echo -> 405", r.stdout)

    # Malformed and oversized requests: an error status, then the server
    # closes the connection.
    cases = [
        (b"GARBAGE\r\n\r\n", 400, "a request line without method/target/version"),
        (b"GET / HTTP/1.1\r\n\r\n", 400, "HTTP/1.1 without Host"),
        (b"GET / HTTP/1.1\r\nHost: x\r\nbad header line\r\n\r\n", 400, "a header line without a colon"),
        (b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n", 400, "a negative Content-Length"),
        (b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400,
         "conflicting Content-Lengths"),
        (b"GET / HTTP/9.9\r\nHost: x\r\n\r\n", 505, "HTTP/9.9"),
        (b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n", 431, "a 20 KB header"),
        (b"GET / HTTP/1.1\r\nHost: x\r\n" + b"X-A: b\r\n" * 200 + b"\r\n", 431, "200 header fields"),
        (b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999\r\n\r\n", 413, "a 100 MB body"),
        (b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 501,
         "Transfer-Encoding: chunked"),
        (b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n", 414, "a 20 KB request line"),
        (b"\x00\x01\x02\xff\xfe\r\n\r\n", 400, "binary junk"),
    ]
    for data, want, what in cases:
        got = raw(server, data)
        status = got.split(b" ", 2)[1:2]
        check(got.startswith(b"HTTP/1.1 ") and status == [str(want).encode()] and
              b"Connection: close" in got, f"{what} -> {want} and close", got[:200])

    # Pipelining: four requests in one write; the answers come in order and
    # the last one (Connection: close) ends the connection.
    pipelined = (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
                 b"GET /json HTTP/1.1\r\nHost: x\r\n\r\n"
                 b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
                 b"GET /nope HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    resps = parse_responses(raw(server, pipelined))
    check([(s, b) for s, _, b in resps][:1] == [(200, b"Hello, World!\n")] and
          [s for s, _, _ in resps] == [200, 200, 200, 404] and resps[2][2] == b"hello",
          "4 pipelined requests answered in order", [(s, b[:40]) for s, _, b in resps])

    # One request delivered a byte at a time (partial parsing across reads).
    s = server.connect()
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    req = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\nConnection: close\r\n\r\nhello world"
    for i in range(len(req)):
        s.sendall(req[i:i + 1])
        time.sleep(0.002)
    resps = parse_responses(harness.recv_all(s))
    s.close()
    check([(st, b) for st, _, b in resps] == [(200, b"hello world")], "a request sent byte by byte",
          resps)

    # Mutated requests: whatever the answer, the server keeps serving.
    harness.fuzz(server, [b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
                          b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
                          b"GET /sleep?ms=1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"])
    check(server.alive() and curl(f"{base}/").stdout == "Hello, World!\n", "150 mutated requests: still serving")

    # Load: wrk, bounded in time, must see no socket errors and only 2xx.
    if harness.have("wrk"):
        r = harness.run(["wrk", "-t1", "-c20", "-d2s", "--timeout", "5s", f"{base}/"], timeout=30)
        log("# wrk: " + " | ".join(line.strip() for line in r.stdout.splitlines()[-4:]))
        m = re.search(r"(\d+) requests in", r.stdout)
        check(r.returncode == 0 and m and int(m.group(1)) > 0, "wrk: requests were served", r.stdout)
        check("Socket errors" not in r.stdout and "Non-2xx" not in r.stdout,
              "wrk: no socket errors, no non-2xx responses", r.stdout)
    else:
        log("# wrk not installed: load test skipped")

    r = curl(f"{base}/")
    check(r.stdout == "Hello, World!\n", "still serving after the load", r.stdout)
    # Shutdown with an idle keep-alive connection open.
    idle = server.connect()
    idle.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    harness.recv_until(idle, lambda d: d.endswith(b"Hello, World!\n"))
    server.stop()
    check(harness.recv_all(idle, 5) == b"", "idle keep-alive connection closed at shutdown")

    test_debug(exe)


def test_debug(exe):
    r = harness.run([exe, "-listen", "127.0.0.1:0", "-block-rate", "100"], timeout=15)
    check(r.returncode == 2 and "need -debug" in r.stderr, "-block-rate without -debug: exit 2",
          (r.returncode, r.stderr))

    # The server's temporary trace files and flight recorder dumps go to a
    # directory of the test's own.
    tmp = tempfile.mkdtemp(prefix="http_server_debug")
    old_tmpdir = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = tmp
    try:
        server = harness.Server(exe, "-debug", "-flight-dir", tmp)
    finally:
        if old_tmpdir is None:
            del os.environ["TMPDIR"]
        else:
            os.environ["TMPDIR"] = old_tmpdir

    def is_gzip(body):
        try:
            return body[:2] == b"\x1f\x8b" and len(gzip.decompress(body)) > 0
        except (OSError, EOFError):
            return False

    def attachment(headers, body, filename):
        return (headers.get("content-type") == "application/octet-stream" and
                headers.get("content-disposition") == f'attachment; filename="{filename}"' and
                int(headers.get("content-length", -1)) == len(body))

    # The index, and the profiles' text forms.
    status, headers, body = get(server, "/debug/pprof/")
    page = body.decode(errors="replace")
    check(status == 200 and headers.get("content-type", "").startswith("text/html") and
          all(p in page for p in ("/debug/pprof/profile", "/debug/pprof/goroutine", "/debug/pprof/block",
                                  "/debug/pprof/mutex", "/debug/trace", "/debug/flightrecorder")),
          "GET /debug/pprof/ -> 200, an index of the debug routes", (status, headers, page[:600]))
    status, headers, body = get(server, "/debug/pprof/goroutine?debug=1")
    check(status == 200 and headers.get("content-type", "").startswith("text/plain") and
          b"goroutine profile: total" in body, "goroutine?debug=1 -> Go's text profile", (status, body[:300]))
    status, _, body = get(server, "/debug/pprof/goroutine?debug=2")
    check(status == 200 and b"goroutine 1 [" in body, "goroutine?debug=2 -> every goroutine's traceback",
          (status, body[:300]))
    status, headers, body = get(server, "/debug/pprof/goroutine")
    check(status == 200 and attachment(headers, body, "goroutine") and is_gzip(body),
          "goroutine (debug=0) -> gzipped pprof, an attachment", (status, headers, body[:16]))
    status, _, body = get(server, "/debug/pprof/block?debug=1")
    check(status == 200 and body.startswith(b"--- contention:"), "block?debug=1 -> Go's text", (status, body[:200]))
    status, _, body = get(server, "/debug/pprof/mutex?debug=1")
    check(status == 200 and body.startswith(b"--- mutex:"), "mutex?debug=1 -> Go's text", (status, body[:200]))

    # Bad parameters: 400 with the range; an unknown profile: Go's 404.
    for path, want in [("/debug/pprof/profile?seconds=0", b"1 <= N <= 300"),
                       ("/debug/pprof/profile?seconds=301", b"1 <= N <= 300"),
                       ("/debug/pprof/profile?seconds=abc", b"1 <= N <= 300"),
                       ("/debug/trace?seconds=61", b"1 <= N <= 60"),
                       ("/debug/trace?format=xml", b"perfetto or json"),
                       ("/debug/flightrecorder?format=xml", b"perfetto or json"),
                       ("/debug/pprof/goroutine?debug=3", b"debug=0"),
                       ("/debug/pprof/block?seconds=5", b"not supported")]:
        status, _, body = get(server, path)
        check(status == 400 and want in body, f"GET {path} -> 400", (status, body))
    status, _, body = get(server, "/debug/pprof/heap")
    check(status == 404 and body == b"Unknown profile\n", "GET /debug/pprof/heap -> 404 Unknown profile",
          (status, body))

    # A CPU profile while a client keeps asking for /: the handler parks,
    # the other connection goes on being served.
    hammer = Hammer(server)
    time.sleep(0.2)
    before = hammer.served
    t0 = time.monotonic()
    status, headers, body = get(server, "/debug/pprof/profile?seconds=1")
    took = time.monotonic() - t0
    during = hammer.served - before
    hammer.stop()
    check(not hammer.errors, "the client on / saw no errors", hammer.errors)
    check(status == 200 and attachment(headers, body, "profile") and is_gzip(body) and took >= 1.0,
          "profile?seconds=1 -> 200, 1 s, gzipped pprof as an attachment", (status, headers, body[:16], took))
    check(during > 0, "requests to / were answered during the profile", during)
    labelled = b"route" in gzip.decompress(body)
    harness.log(f"# {during} requests to / during the profile; route label in its samples: {labelled}")

    # Two profiles, or two traces, at once: the second gets Go's 500.
    results = {}

    def fetch(key, path):
        results[key] = get(server, path)

    firsts = [threading.Thread(target=fetch, args=(k, p)) for k, p in
              [("profile", "/debug/pprof/profile?seconds=2"), ("trace", "/debug/trace?seconds=2&format=json")]]
    for t in firsts:
        t.start()
    time.sleep(0.5)
    seconds = [threading.Thread(target=fetch, args=(k, p)) for k, p in
               [("profile2", "/debug/pprof/profile?seconds=1"), ("trace2", "/debug/trace?seconds=1&format=json")]]
    for t in seconds:
        t.start()
    for t in firsts + seconds:
        t.join(30)
    for what, key, text in [("CPU profile", "profile", b"Could not enable CPU profiling: cpu profiling already in use\n"),
                            ("trace", "trace", b"Could not enable tracing: tracing is already enabled\n")]:
        got = sorted([results.get(key), results.get(key + "2")], key=lambda r: r[0] if r else 0)
        check(None not in got and [r[0] for r in got] == [200, 500] and got[1][2] == text,
              f"a second {what} at once -> 500 with Go's text",
              [(r[0], r[2][:100]) if r else None for r in got])

    # A JSON trace with the requests' regions ("handle /").
    hammer = Hammer(server)
    status, headers, body = get(server, "/debug/trace?seconds=1&format=json")
    hammer.stop()
    try:
        trace = json.loads(body)
    except ValueError:
        trace = {}
    events = trace.get("traceEvents", []) if isinstance(trace, dict) else []
    check(status == 200 and attachment(headers, body, "trace.json") and events,
          "trace?seconds=1&format=json -> 200, a JSON trace", (status, headers, body[:200]))
    check(any(e.get("name") == "handle /" and e.get("cat") == "region" for e in events),
          "the trace has the requests' regions (handle /)", len(events))
    check(os.listdir(tmp) == [], "the traces' temporary files are gone", os.listdir(tmp))

    # The flight recorder's last seconds, as JSON and as Perfetto's protobuf.
    status, headers, body = get(server, "/debug/flightrecorder?format=json")
    try:
        flight = json.loads(body)
    except ValueError:
        flight = {}
    check(status == 200 and attachment(headers, body, "flight.json") and isinstance(flight, dict) and
          flight.get("traceEvents"), "flightrecorder?format=json -> 200, a JSON trace", (status, headers, body[:200]))
    status, headers, body = get(server, "/debug/flightrecorder")
    check(status == 200 and attachment(headers, body, "flight.perfetto-trace") and len(body) > 0,
          "flightrecorder (perfetto) -> 200, a Perfetto trace", (status, headers, len(body)))

    check(get(server, "/")[2] == b"Hello, World!\n", "-debug: / still answers")
    server.stop()
    if os.listdir(tmp):
        harness.log(f"# left in {tmp}: {os.listdir(tmp)} (a stall report's flight recorder dump?)")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    harness.main(test)
