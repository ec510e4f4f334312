#!/usr/bin/env python3
"""Integration test for samples/http_server in HTTPS mode (gort::tls):
makes a CA and a server certificate with the openssl command, starts the
server with -tls-cert/-tls-key, and drives it with curl --cacert: GET and
keep-alive reuse over TLS with ALPN http/1.1; curl without the CA refuses
the certificate (exit 60); plain HTTP to the TLS port fails fast instead of
hanging; a missing certificate file stops the server with a clear error;
SIGTERM still shuts it down cleanly."""

import os
import subprocess
import tempfile

import harness
from harness import check


def make_pki(d):
    def openssl(*args):
        r = harness.run(["openssl", *args], timeout=60)
        check(r.returncode == 0, "openssl " + args[0], r.stderr)

    ca_key, ca_crt = os.path.join(d, "ca.key"), os.path.join(d, "ca.crt")
    key, csr, crt = (os.path.join(d, n) for n in ("server.key", "server.csr", "server.crt"))
    ext = os.path.join(d, "ext.cnf")
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", ca_key, "-out", ca_crt, "-days", "2", "-subj", "/CN=gort test CA")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", key, "-out", csr, "-subj", "/CN=localhost")
    openssl("x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key, "-CAcreateserial",
            "-out", crt, "-days", "2", "-extfile", ext)
    return ca_crt, crt, key


def test(exe):
    harness.require("curl", "openssl")
    with tempfile.TemporaryDirectory() as d:
        ca, crt, key = make_pki(d)
        server = harness.Server(exe, "-tls-cert", crt, "-tls-key", key)
        url = f"https://localhost:{server.port}"
        resolve = f"localhost:{server.port}:127.0.0.1"

        def curl(*args):
            return harness.run(["curl", "-sS", "--max-time", "15", "--resolve", resolve, *args], timeout=30)

        r = curl("--cacert", ca, "-w", "\n%{http_code}", f"{url}/")
        check(r.returncode == 0 and r.stdout == "Hello, World!\n\n200", "GET / over TLS -> 200", (r.stdout, r.stderr))
        r = curl("-v", "--cacert", ca, f"{url}/", f"{url}/json")
        check(r.returncode == 0 and "Hello, World!" in r.stdout and '"message"' in r.stdout,
              "two requests over TLS", (r.stdout, r.stderr))
        check("Re-using existing connection" in r.stderr or "Reusing existing connection" in r.stderr,
              "keep-alive reuses the TLS connection", r.stderr)
        check("ALPN" in r.stderr and "http/1.1" in r.stderr, "ALPN negotiates http/1.1", r.stderr)
        r = curl(f"{url}/")
        check(r.returncode == 60, "curl without the CA refuses the certificate (exit 60)",
              (r.returncode, r.stderr))
        r = curl("--cacert", ca, "-o", "/dev/null", "-w", "%{http_code}", f"{url}/no/such/page")
        check(r.stdout == "404", "404 over TLS", r.stdout)
        r = harness.run(["curl", "-sS", "--max-time", "10", f"http://127.0.0.1:{server.port}/"], timeout=30)
        check(r.returncode != 0 and r.returncode != 28, "plain HTTP to the TLS port fails, without hanging",
              (r.returncode, r.stderr))
        r = curl("--cacert", ca, "-w", "\n%{http_code}", f"{url}/")
        check(r.stdout.endswith("200"), "the server still serves after the bad client", r.stdout)
        server.stop()

        p = subprocess.run([exe, "-listen", "127.0.0.1:0", "-tls-cert", os.path.join(d, "missing.crt"),
                            "-tls-key", key], capture_output=True, text=True, timeout=30)
        check(p.returncode == 1 and "missing.crt: No such file or directory" in p.stderr,
              "a missing certificate file is a clear error", (p.returncode, p.stderr))


if __name__ == "__main__":
    harness.main(test)
