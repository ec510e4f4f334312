#!/usr/bin/env python3
"""Process memory per idle keep-alive HTTP connection: samples/http_server as
it is (sessions: an idle connection holds no goroutine), with -goroutines (a
goroutine per connection), and its Go twin (bench/go/http_server), 1 P each.

For each server, in turn: start it on 127.0.0.1:0, read its VmRSS and VmPTE
(/proc/PID/status), open N connections from this process (spread over the
source addresses 127.0.0.1-127.0.0.8, so that N may pass the ephemeral port
range of one address), send `GET /` on each and read the whole response, so
that every connection has served a request and sits idle in keep-alive,
wait a moment, read VmRSS and VmPTE again, and report
(after - before) / N bytes: the server's process memory per idle
connection (the kernel's socket buffers are not in it). The soft
RLIMIT_NOFILE is raised to the hard limit; N is lowered (with a message)
when N + 64 descriptors do not fit.

With --tls the gort sides serve HTTPS (a throwaway self-signed certificate
made with openssl; the Go twin has no TLS mode and is left out) and the
client completes a TLS handshake on each connection first.

Usage: bench/idle_http.py [--build-dir build] [--conns 10000] [--runs 3] [--tls]
Prints one line per server and run, then the medians and the ratios.
Standard library only (and serverbench.py beside it).
"""

import argparse
import os
import resource
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import serverbench as sb  # noqa: E402

REQUEST = b"GET / HTTP/1.1\r\nHost: bench\r\n\r\n"


def status_bytes(pid):
    rss = pte = 0
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
            elif line.startswith("VmPTE:"):
                pte = int(line.split()[1]) * 1024
    return rss + pte


def read_response(s):
    """Reads one response with a Content-Length body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(4096)
        if not chunk:
            raise sb.BenchError("the server closed a connection")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    while len(body) < length:
        chunk = s.recv(4096)
        if not chunk:
            raise sb.BenchError("the server closed a connection mid-response")
        body += chunk


def make_cert(d):
    crt, key = os.path.join(d, "srv.crt"), os.path.join(d, "srv.key")
    sb.run_cmd(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                "-nodes", "-keyout", key, "-out", crt, "-days", "1", "-subj", "/CN=localhost",
                "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
    return crt, key


def measure(exe, args, n, tls_ctx=None):
    with sb.Server(exe, ["-listen", "127.0.0.1:0", "-procs", "1", "-max-conns", str(n + 100),
                         "-idle-timeout", "600"] + args, cpus="0") as srv:
        host, port = srv.addr.rsplit(":", 1)
        time.sleep(0.2)
        before = status_bytes(srv.pid)
        socks = []
        try:
            for i in range(n):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.bind(("127.0.0.%d" % (1 + i % 8), 0))
                s.connect((host, int(port)))
                if tls_ctx is not None:
                    s = tls_ctx.wrap_socket(s, server_hostname="localhost")
                s.sendall(REQUEST)
                read_response(s)
                socks.append(s)
            time.sleep(1.0)  # let the server settle (goroutines parked, buffers pooled)
            srv.check_alive()
            after = status_bytes(srv.pid)
        finally:
            for s in socks:
                s.close()
        return (after - before) / n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--conns", type=int, default=10000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--tls", action="store_true", help="HTTPS, gort only")
    args = ap.parse_args()
    build = os.path.abspath(args.build_dir)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    n = args.conns
    if hard != resource.RLIM_INFINITY and n + 64 > hard:
        n = hard - 64
        sb.log("RLIMIT_NOFILE allows %d descriptors: %d connections" % (hard, n))
    gort_exe = sb.ninja(build, ["samples/http_server/http_server"])[0]
    tmp = tempfile.TemporaryDirectory()
    tls_ctx, tls_args = None, []
    if args.tls:
        crt, key = make_cert(tmp.name)
        tls_ctx = ssl.create_default_context(cafile=crt)
        tls_args = ["-tls-cert", crt, "-tls-key", key]
        sides = [("gort sessions", gort_exe, tls_args),
                 ("gort goroutines", gort_exe, ["-goroutines"] + tls_args)]
    else:
        go_exe = sb.build_go(build, "http_server")
        sides = [("gort sessions", gort_exe, []), ("gort goroutines", gort_exe, ["-goroutines"]),
                 ("go", go_exe, [])]
    results = {name: [] for name, _, _ in sides}
    for run in range(args.runs):
        for name, exe, extra in sides:
            b = measure(exe, extra, n, tls_ctx)
            results[name].append(b)
            print("run %d  %-16s %8.0f bytes/conn" % (run + 1, name, b), flush=True)
    go = statistics.median(results["go"]) if "go" in results else None
    print("\n%d idle keep-alive %s connections, median of %d runs:"
          % (n, "HTTPS" if args.tls else "HTTP", args.runs))
    for name, _, _ in sides:
        m = statistics.median(results[name])
        vs = "  (%.2fx Go)" % (m / go) if go else ""
        print("  %-16s %8.0f bytes/conn%s" % (name, m, vs))


if __name__ == "__main__":
    try:
        main()
    except sb.BenchError as e:
        sb.log("idle_http: %s" % e)
        sys.exit(1)
