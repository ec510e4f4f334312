#!/usr/bin/env python3
"""Integration test for samples/kv_server: redis-cli (commands, errors,
expiry, KEYS patterns, --pipe), nc and raw sockets (inline commands,
pipelining, split and binary payloads, protocol errors), then a bounded
redis-benchmark run."""

import re
import time

import harness
from harness import check, log


def resp(*args):
    """A command in RESP multibulk form."""
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


def test(exe):
    harness.require("redis-cli")
    server = harness.Server(exe)
    port = str(server.port)

    def cli(*args, input=None):
        r = harness.run(["redis-cli", "-h", server.host, "-p", port, *args], input=input, timeout=20)
        return r.stdout.rstrip("\n")

    check(cli("PING") == "PONG", "PING -> PONG")
    check(cli("PING", "hello") == "hello", "PING msg -> msg")
    check(cli("ECHO", "hi there") == "hi there", "ECHO")
    check(cli("SET", "greeting", "hello world") == "OK", "SET")
    check(cli("GET", "greeting") == "hello world", "GET")
    check(cli("GET", "missing") == "", "GET of a missing key -> nil")
    check(cli("SET", "greeting", "x", "NX") == "" and cli("GET", "greeting") == "hello world",
          "SET NX on an existing key does nothing")
    check(cli("SET", "greeting", "hey", "XX", "GET") == "hello world" and cli("GET", "greeting") == "hey",
          "SET XX GET returns the old value")
    check([cli("INCR", "counter") for _ in range(3)] == ["1", "2", "3"], "INCR counts")
    check(cli("INCRBY", "counter", "10") == "13" and cli("DECR", "counter") == "12", "INCRBY/DECR")
    check(cli("INCR", "greeting") == "ERR value is not an integer or out of range",
          "INCR on a non-integer -> Redis's error", cli("INCR", "greeting"))
    cli("SET", "big", "9223372036854775807")
    check(cli("INCR", "big") == "ERR increment or decrement would overflow", "INCR overflow error")

    # Multi-key commands.
    check(cli("MSET", "k1", "v1", "k2", "v2", "k3", "v3") == "OK", "MSET")
    check(cli("MGET", "k1", "nope", "k3").split("\n") == ["v1", "", "v3"], "MGET with a missing key")
    check(cli("EXISTS", "k1", "k2", "nope", "k1") == "3", "EXISTS counts (duplicates too)")
    check(cli("DEL", "k1", "k2", "nope") == "2", "DEL returns how many existed")
    check(cli("EXISTS", "k1") == "0", "deleted keys are gone")

    # Expiry.
    check(cli("EXPIRE", "greeting", "100") == "1", "EXPIRE")
    ttl = cli("TTL", "greeting")
    check(ttl in ("99", "100"), "TTL after EXPIRE 100", ttl)
    check(cli("TTL", "counter") == "-1" and cli("TTL", "nope") == "-2", "TTL -1 (no expiry), -2 (no key)")
    check(cli("PERSIST", "greeting") == "1" and cli("TTL", "greeting") == "-1", "PERSIST")
    check(cli("SET", "short", "v", "PX", "150") == "OK", "SET PX 150")
    pttl = int(cli("PTTL", "short"))
    check(0 < pttl <= 150, "PTTL within range", pttl)
    check(cli("PEXPIRE", "counter", "150") == "1", "PEXPIRE 150")
    time.sleep(0.4)
    check(cli("GET", "short") == "" and cli("EXISTS", "counter") == "0", "expired keys are gone")
    # Active expiry: keys nobody touches are removed by the sweeper (DBSIZE
    # counts expired keys until they are removed, as in Redis).
    before = int(cli("DBSIZE"))
    cli("MSET", *[x for i in range(100) for x in (f"vol{i}", "v")])
    harness.run(["redis-cli", "-p", port, "--pipe"],
                input="".join(f"PEXPIRE vol{i} 100\r\n" for i in range(100)), timeout=20)
    check(int(cli("DBSIZE")) == before + 100, "100 keys with a 100 ms expiry")
    time.sleep(0.6)
    after = int(cli("DBSIZE"))
    check(after == before, "the sweeper removed them without anyone touching them", (before, after))
    check(cli("SET", "k", "v", "EX", "0") == "ERR invalid expire time in 'set' command",
          "SET EX 0 -> invalid expire time")
    check(cli("SET", "k", "v", "EX", "abc") == "ERR value is not an integer or out of range",
          "SET EX abc -> not an integer")
    check(cli("SET", "k", "v", "BOGUS") == "ERR syntax error", "SET with a bad option -> syntax error")

    # KEYS with glob patterns.
    cli("FLUSHALL")
    cli("MSET", "user:1", "a", "user:2", "b", "user:10", "c", "admin", "d", "h?llo", "e", "hello", "f")
    keys = lambda pat: sorted(cli("KEYS", pat).split("\n")) if cli("KEYS", pat) else []
    check(keys("*") == sorted(["user:1", "user:2", "user:10", "admin", "h?llo", "hello"]), "KEYS *")
    check(keys("user:?") == ["user:1", "user:2"], "KEYS user:?")
    check(keys("user:*") == ["user:1", "user:10", "user:2"], "KEYS user:*")
    check(keys("[ah]*") == ["admin", "h?llo", "hello"], "KEYS [ah]*")
    check(keys("user:[^1]") == ["user:2"], "KEYS user:[^1]")
    check(keys("user:[0-1]*") == ["user:1", "user:10"], "KEYS user:[0-1]*")
    check(keys("h\\?llo") == ["h?llo"], "KEYS with an escaped ?")
    check(keys("nomatch*") == [], "KEYS with no match")
    check(cli("DBSIZE") == "6", "DBSIZE")

    # Errors, with Redis's texts.
    out = cli("FOO", "bar")
    check(out.startswith("ERR unknown command 'FOO', with args beginning with: 'bar'"),
          "unknown command -> Redis's error text", out)
    check(cli("GET") == "ERR wrong number of arguments for 'get' command", "GET without a key -> arity error")
    check(cli("MSET", "a", "b", "c") == "ERR wrong number of arguments for 'mset' command",
          "MSET with an odd count -> arity error")

    # Tools: CONFIG GET (redis-benchmark asks), COMMAND.
    check(cli("CONFIG", "GET", "save") == "save", "CONFIG GET save (an empty value)")
    check(cli("CONFIG", "GET", "appendonly").split("\n") == ["appendonly", "no"], "CONFIG GET appendonly")

    # Pipelining with redis-cli --pipe: 1000 INCRs plus two commands in one stream.
    data = "SET p 0\r\n" + "INCR p\r\n" * 1000 + "GET p\r\n"
    r = harness.run(["redis-cli", "-p", port, "--pipe"], input=data, timeout=30)
    check("errors: 0, replies: 1002" in r.stdout and cli("GET", "p") == "1000",
          "redis-cli --pipe: 1002 replies, no errors", r.stdout + r.stderr)

    # Raw sockets: inline commands, pipelined in one write; replies in order.
    s = server.connect()
    s.sendall(b"PING\r\nSET a 1\r\nINCR a\r\nGET a\r\nSET q \"two words\"\r\nGET q\r\n" + resp("PING"))
    want = b"+PONG\r\n+OK\r\n:2\r\n$1\r\n2\r\n+OK\r\n$9\r\ntwo words\r\n+PONG\r\n"
    got = harness.recv_until(s, lambda d: len(d) >= len(want))
    check(got == want, "pipelined inline + multibulk commands answered in order", got)
    # A binary value (CR, LF, NUL) split into one-byte writes.
    value = b"line1\r\nline2\x00\xff end"
    cmd = resp("SET", b"bin", value) + resp("GET", "bin")
    for i in range(len(cmd)):
        s.sendall(cmd[i:i + 1])
    want = b"+OK\r\n$%d\r\n%s\r\n" % (len(value), value)
    got = harness.recv_until(s, lambda d: len(d) >= len(want))
    check(got == want, "binary value sent a byte at a time round-trips", got)
    # A large value.
    big = b"x" * (3 << 20)
    s.sendall(resp("SET", "big", big) + resp("STRLEN", "big"))
    got = harness.recv_until(s, lambda d: d.endswith(b":%d\r\n" % len(big)), timeout=20)
    check(got == b"+OK\r\n:%d\r\n" % len(big), "a 3 MiB value", got[:100])
    s.sendall(b"QUIT\r\n")
    check(harness.recv_all(s) == b"+OK\r\n", "QUIT -> +OK, then the server closes")
    s.close()

    # Protocol errors: an error reply, then the connection is closed.
    for data, want in [
        (b"*abc\r\n", b"-ERR Protocol error: invalid multibulk length\r\n"),
        (b"*1\r\n$-2\r\n", b"-ERR Protocol error: invalid bulk length\r\n"),
        (b"*1\r\n+PING\r\n", b"-ERR Protocol error: expected '$', got '+'\r\n"),
        (b"SET k \"unterminated\r\n", b"-ERR Protocol error: unbalanced quotes in request\r\n"),
        (b"PING\r\n*99999999\r\n", b"+PONG\r\n-ERR Protocol error: invalid multibulk length\r\n"),
    ]:
        s = server.connect()
        s.sendall(data)
        got = harness.recv_all(s)
        s.close()
        check(got == want, f"protocol error for {data[:20]!r}", got)

    # Mutated commands: whatever the answer, the server keeps serving.
    harness.fuzz(server, [resp("SET", "k", "v"), b"GET k\r\n", b"KEYS *[a-\\\r\n", b'SET "a\\x41" b\r\n',
                          resp("KEYS", "[[[*?\\]]"), b"EXPIRE k 9223372036854775807\r\n",
                          b"SET k v PXAT -1\r\n", b"INCRBY k -9223372036854775808\r\n", resp("MSET", "a", "1")])
    check(server.alive() and cli("PING") == "PONG", "150 mutated command streams: still serving")

    # nc with inline commands (telnet style).
    if harness.have("nc"):
        r = harness.run(["nc", "-N", server.host, port], input="SET n 41\r\nINCR n\r\nQUIT\r\n", timeout=20)
        # (text mode: \r\n reads as \n)
        check(r.stdout == "+OK\n:42\n+OK\n", "nc: inline commands", r.stdout)

    # Load: redis-benchmark, bounded in requests.
    if harness.have("redis-benchmark"):
        r = harness.run(["redis-benchmark", "-h", server.host, "-p", port, "-q", "-n", "20000", "-c", "20",
                         "-t", "ping,set,get,incr,mset"], timeout=60)
        out = r.stdout + r.stderr
        finals = {}
        for line in re.split(r"[\r\n]+", out):
            m = re.match(r"^\s*(\S.*?): ([\d.]+) requests per second", line)
            if m:
                finals[m.group(1)] = float(m.group(2))
        log("# redis-benchmark: " + ", ".join(f"{k} {v:.0f}/s" for k, v in finals.items()))
        tests = ["PING_INLINE", "PING_MBULK", "SET", "GET", "INCR", "MSET (10 keys)"]
        check(r.returncode == 0 and all(finals.get(t, 0) > 0 for t in tests),
              "redis-benchmark: a requests-per-second line for each test", out[-1500:])
        check("error" not in out.lower(), "redis-benchmark: no errors", out[-1500:])
    else:
        log("# redis-benchmark not installed: load test skipped")

    check(cli("PING") == "PONG", "still serving after the load")
    idle = server.connect()
    server.stop()
    check(harness.recv_all(idle, 5) == b"", "idle client connection closed at shutdown")


if __name__ == "__main__":
    harness.main(test)
