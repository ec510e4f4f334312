#!/usr/bin/env python3
"""Run gort's benchmarks and their Go twins side by side and print ratios.

For every C++ program bench/<name>.cpp that has a twin bench/go/<name>/main.go
this script builds both (meson/ninja in --build-dir; `go build` into
<build-dir>/bench-go), lists their cases, and runs every case that both sides
have, each in a fresh process (so that peak RSS belongs to the case), the gort
run and the Go run back to back, --repetitions times, alternating which side
goes first. It prints the medians and the ratio gort/Go and can write the same
table into a Markdown file between marker comments.

Cases are named "<workload>/procs:<N>"; both sides run with N Ps (gort's
Config::procs, Go's GOMAXPROCS; GORT_MAXPROCS and GOMAXPROCS are exported as
N too). Metric names carry their unit; lower is better except for metrics
ending in "/s" (throughput), where higher is better. See
bench/bench_util.hpp and docs/benchmarks.md.

With --http it also runs bench/http_compare (samples/http_server against its
Go twin and the C floor bench/http_ceiling.c under wrk, one P each, pinned to
different CPUs), once as it is and once with each server limited to half a
CPU (--server-bound), and adds its rows: http_hello/procs:1 requests/s and
server_cpu_us/request, http_hello_halfcpu/procs:1 requests/s. With --echo it
runs bench/echo_compare (samples/echo_server, its Go twin and the C floor
bench/echo_ceiling.c under bench/echo_load.c) and adds its rows for 1 and
2 Ps, msgs/s and server_cpu_us/msg: echo_server/procs:N (100 ping-pong
connections), echo_pingpong1000/procs:N (1,000) and echo_stream/procs:N
(streaming). Rows named "<case> vs C floor" hold the C floor server's
figure in the Go column.

Standard library only.
"""

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
GO_DIR = os.path.join(BENCH, "go")

MD_BEGIN = "<!-- bench/compare:begin -->"
MD_END = "<!-- bench/compare:end -->"

# Targets: the ratio gort/Go must be at most this much, or at least this
# much for a throughput metric (one ending in "/s"; medians of back-to-back
# runs on a 2-core machine). Keys are (case, metric).
TARGETS = {
    ("spawn_join/procs:2", "ns/goroutine"): 0.5,
    ("spawn_join/procs:2", "peak_rss_MiB"): 2.0,
    ("yield_ping/procs:1", "ns/switch"): 0.5,
    ("parked/procs:2", "bytes/goroutine"): 1.5,
    ("parked/procs:2", "spawn_ms"): 1.0,
    ("parked/procs:2", "wake_ms"): 1.0,
    ("skynet/procs:2", "ms"): 0.7,
    ("burst/procs:2", "us/goroutine"): 1.0,
    ("burst/procs:2", "wake_ms"): 1.0,
    ("burst_1/procs:2", "us/goroutine"): 1.0,
    ("burst_100/procs:2", "us/goroutine"): 1.0,
    ("burst_100/procs:2", "wake_ms"): 1.0,
    ("burst_10k/procs:2", "us/goroutine"): 1.0,
    ("burst_10k/procs:2", "wake_ms"): 1.0,
    ("sleepers/procs:2", "spawn_ms"): 1.0,
    ("sleepers/procs:2", "late_max_ms"): 1.0,
    ("sleepers/procs:2", "late_p99_ms"): 1.0,
    ("pingpong/procs:1", "ns/roundtrip"): 0.7,
    ("pingpong/procs:2", "ns/roundtrip"): 1.0,
    ("buffered_1x1/procs:2", "ns/item"): 0.8,
    ("buffered_4x4/procs:2", "ns/item"): 0.8,
    ("select4/procs:2", "ns/message"): 1.0,
    ("mutex100/procs:2", "ns/lock"): 1.0,
    ("rwmutex100/procs:2", "ns/access"): 1.0,
    ("tcp_echo/procs:1", "msgs/s"): 1.2,
    ("tcp_echo/procs:2", "msgs/s"): 1.2,
    ("timer_rearm/procs:1", "ns/rearm"): 1.0,
    ("timer_rearm/procs:2", "ns/rearm"): 1.0,
    ("deadline_rearm/procs:1", "ns/rearm"): 1.0,
    ("tls_echo/procs:1", "msgs/s"): 1.0,
    ("tls_echo/procs:2", "msgs/s"): 1.0,
    # Process CPU (client and server in one process) per handshake and per
    # message: at most Go's.
    ("tls_echo/procs:1", "cpu_us/handshake"): 1.0,
    ("tls_echo/procs:2", "cpu_us/handshake"): 1.0,
    ("tls_echo/procs:1", "cpu_us/msg"): 1.0,
    ("tls_echo/procs:2", "cpu_us/msg"): 1.0,
    ("tls_echo/procs:1", "cpu_us/resumed"): 1.0,
    ("tls_echo/procs:2", "cpu_us/resumed"): 1.0,
    # Below the floor of one stack page per parked connection
    # (docs/server-cpu.md), so it reads MISSED.
    ("idle_conns/procs:1", "bytes/conn"): 1.0,
    ("http_hello/procs:1", "requests/s"): 1.2,
    # Server CPU per request or message (bench/http_compare, bench/echo_compare).
    ("http_hello/procs:1", "server_cpu_us/request"): 0.75,
    ("http_hello/procs:1 vs C floor", "server_cpu_us/request"): 1.10,
    ("http_hello_halfcpu/procs:1", "requests/s"): 1.2,
    ("echo_server/procs:1", "server_cpu_us/msg"): 0.75,
    ("echo_server/procs:2", "server_cpu_us/msg"): 0.75,
    # 1,000 ping-pong connections and streaming, one P (PhotonLibOS's
    # published echo figures are on one core): within 5 % of the C floor.
    ("echo_pingpong1000/procs:1 vs C floor", "server_cpu_us/msg"): 1.05,
    ("echo_stream/procs:1 vs C floor", "server_cpu_us/msg"): 1.05,
}

# Targets on gort's own value, for metrics Go has no twin of: at most this
# much, or at least this much for a throughput metric (one ending in "/s").
# Keys are (case, metric).
GORT_TARGETS = {
    ("sysmon_overhead/procs:2", "overhead_pct"): 1.0,
    ("sysmon_overhead/procs:2", "loop_overhead_vs_threads_pct"): 1.0,
    ("sysmon_overhead/procs:2", "sysmon_wakeups_per_s"): 200.0,
    # Blocking libraries on goroutines (bench/hook_bench.cpp).
    ("libc_sleep/procs:2", "ms"): 400.0,
    ("pipe_readers/procs:2", "ms"): 800.0,
    ("eventfd_read/procs:1", "overhead_ns"): 30.0,
    ("hiredis_incr/procs:2", "INCR/s"): 67000.0,
    # The same target where it was set: 67k INCR/s against redis-benchmark's
    # 106k with the same 500 clients, on that machine.
    ("hiredis_incr/procs:2", "vs_redis_benchmark"): 0.63,
    ("libpq_exec/procs:2", "ms"): 1000.0,
    ("curl_easy/procs:2", "ms"): 1300.0,
    ("beast_sync/procs:2", "ms"): 800.0,
}
for _case in ("libc_sleep", "pipe_readers", "hiredis_incr", "libpq_exec", "curl_easy", "beast_sync"):
    GORT_TARGETS[("%s/procs:2" % _case, "os_threads")] = 8.0
    GORT_TARGETS[("%s/procs:2" % _case, "stall_reports")] = 0.0
TARGETS.update({
    ("libc_sleep/procs:2", "ms"): 1.5,
    ("pipe_readers/procs:2", "ms"): 1.5,
})

# Cases with no Go twin by design (a C++ library has no Go counterpart; a
# tracer without stacks and a flight recorder, which Go 1.19 lacks): run
# for gort alone, against GORT_TARGETS if any, their Go column "n/a".
GORT_ONLY = re.compile(r"^(hiredis_incr|libpq_exec|curl_easy|beast_sync"
                       r"|pingpong_traced_nostacks|pingpong_flightrec)/")

# The C floor servers' side in the JSON of bench/http_compare and
# bench/echo_compare; its CPU figures become "<case> vs C floor" rows.
C_SIDE = "c"
VS_C = " vs C floor"

# Google Benchmark appends these to a benchmark's registered name.
GB_SUFFIX = re.compile(r"/(iterations:\d+|repeats:\d+|threads:\d+|manual_time|real_time|process_time)")
PROCS = re.compile(r"/procs:(\d+)(/|$)")

TIME_TO_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}


class BenchError(Exception):
    pass


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run_cmd(cmd, env=None, cwd=None, timeout=None):
    """Runs cmd, returns stdout; raises BenchError with stderr on failure."""
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BenchError("timed out after %ss: %s" % (timeout, " ".join(cmd)))
    if p.returncode != 0:
        tail = "\n".join((p.stderr or "").strip().splitlines()[-15:])
        raise BenchError("exit status %d: %s\n%s" % (p.returncode, " ".join(cmd), tail))
    return p.stdout


def programs():
    """Names of programs that have both a C++ source and a Go twin."""
    cpp = {f[:-4] for f in os.listdir(BENCH) if f.endswith(".cpp")}
    # Other Go programs (bench/go/http_server and echo_server, for
    # bench/http_compare and bench/echo_compare) are not benchmark twins.
    go = {d for d in os.listdir(GO_DIR) if d.endswith("_bench")
          and os.path.isfile(os.path.join(GO_DIR, d, "main.go"))}
    for name in sorted(cpp - go):
        log("note: bench/%s.cpp has no Go twin bench/go/%s/main.go; skipped" % (name, name))
    for name in sorted(go - cpp):
        log("note: bench/go/%s has no C++ program bench/%s.cpp; skipped" % (name, name))
    return sorted(cpp & go)


def build_cpp(build_dir, names, jobs):
    if not os.path.isfile(os.path.join(build_dir, "build.ninja")):
        log("meson setup %s" % build_dir)
        run_cmd(["meson", "setup", build_dir, "--buildtype=debugoptimized", "-Dbenchmarks=true", "-Dtests=false"],
                cwd=ROOT)
    else:
        opts = json.loads(run_cmd(["meson", "introspect", "--buildoptions", build_dir], cwd=ROOT))
        if any(o["name"] == "benchmarks" and o["value"] is False for o in opts):
            log("meson configure %s -Dbenchmarks=true" % build_dir)
            run_cmd(["meson", "configure", build_dir, "-Dbenchmarks=true"], cwd=ROOT)
        if any(o["name"] == "lock_rank" and o["value"] is True for o in opts):
            log("warning: %s checks lock ranks at run time (-Dlock_rank=true, the test suite's build): "
                "measure in a build without it (./bootstrap bench uses build-bench/)" % build_dir)
    cmd = ["ninja", "-C", build_dir]
    if jobs:
        cmd += ["-j", str(jobs)]
    cmd += ["bench/" + n for n in names]
    log(" ".join(cmd))
    run_cmd(cmd, cwd=ROOT)
    return {n: os.path.join(build_dir, "bench", n) for n in names}


def go_env(work):
    env = dict(os.environ)
    env.update({
        "GOCACHE": os.path.join(work, "gocache"),
        "GOPATH": os.path.join(work, "gopath"),
        "GOFLAGS": "-mod=mod",
        "GOPROXY": "off",
        "GO111MODULE": "on",
        "CGO_ENABLED": "0",
    })
    return env


def build_go(work, names):
    bins = {}
    env = go_env(work)
    for n in names:
        out = os.path.join(work, "bin", n)
        log("go build -o %s ./%s" % (os.path.relpath(out, ROOT), n))
        run_cmd(["go", "build", "-o", out, "./" + n], env=env, cwd=GO_DIR)
        bins[n] = out
    return bins


def normalize(gb_name):
    return GB_SUFFIX.sub("", gb_name)


def list_cpp(binary):
    out = run_cmd([binary, "--benchmark_list_tests=true"])
    return {normalize(l.strip()): l.strip() for l in out.splitlines() if l.strip()}


def list_go(binary):
    out = run_cmd([binary, "-list"])
    return [l.strip() for l in out.splitlines() if l.strip()]


def case_env(case, scale):
    env = dict(os.environ)
    m = PROCS.search(case)
    if m:
        env["GORT_MAXPROCS"] = m.group(1)
        env["GOMAXPROCS"] = m.group(1)
    if scale != 1.0:
        env["GORT_BENCH_SCALE"] = repr(scale)
    return env


def run_cpp_case(binary, gb_name, env, timeout):
    out = run_cmd([binary, "--benchmark_filter=^%s$" % re.escape(gb_name),
                   "--benchmark_format=json"], env=env, timeout=timeout)
    data = json.loads(out)
    runs = [b for b in data.get("benchmarks", []) if b.get("run_type", "iteration") == "iteration"]
    if len(runs) != 1:
        raise BenchError("%s: expected one result for %s, got %d" % (binary, gb_name, len(runs)))
    b = runs[0]
    if b.get("error_occurred"):
        raise BenchError("%s: %s" % (gb_name, b.get("error_message")))
    std = {"name", "family_index", "per_family_instance_index", "run_name", "run_type",
           "repetitions", "repetition_index", "threads", "iterations", "real_time", "cpu_time",
           "time_unit", "aggregate_name", "aggregate_unit", "error_occurred", "error_message",
           "label"}
    metrics = {k: float(v) for k, v in b.items() if k not in std and isinstance(v, (int, float))}
    # Google Benchmark's own time per iteration; compared only if the Go twin
    # reports ns/op too.
    metrics["ns/op"] = float(b["real_time"]) * TIME_TO_NS.get(b.get("time_unit", "ns"), 1.0)
    return metrics


def run_go_case(binary, case, env, timeout):
    out = run_cmd([binary, "-run", "^%s$" % re.escape(case)], env=env, timeout=timeout)
    metrics = {}
    for line in out.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        rec = json.loads(line)
        if rec.get("name") == case:
            metrics[rec["metric"]] = float(rec["value"])
    if not metrics:
        raise BenchError("%s: no results for %s" % (binary, case))
    return metrics


# Metrics that are better higher without being a throughput: shares of a
# reference measured in the same run.
HIGHER_IS_BETTER = {"vs_redis_benchmark"}


def higher_is_better(metric):
    return metric.endswith("/s") or metric in HIGHER_IS_BETTER


def fmt_num(v):
    if v is None:
        return "n/a"
    a = abs(v)
    if a >= 1000:
        return "%.0f" % v
    if a >= 100:
        return "%.1f" % v
    if a >= 10:
        return "%.2f" % v
    return "%.3g" % v


def spread(values):
    """Half the range as a percentage of the median: a rough noise figure."""
    if len(values) < 2:
        return None
    med = statistics.median(values)
    if med == 0:
        return None
    return 100.0 * (max(values) - min(values)) / 2.0 / abs(med)


def build_rows(results):
    rows = []
    for case, sides in results.items():
        gort_m, go_m = sides["gort"], sides["go"]
        names = [m for m in gort_m if m != "ns/op"]
        names += [m for m in go_m if m not in gort_m]
        if "ns/op" in gort_m and "ns/op" in go_m:
            names.append("ns/op")
        for metric in names:
            gv, ov = gort_m.get(metric), go_m.get(metric)
            g = statistics.median(gv) if gv else None
            o = statistics.median(ov) if ov else None
            ratio = g / o if g is not None and o else None
            target = TARGETS.get((case, metric))
            verdict = ""
            if target is not None and ratio is not None:
                ok = ratio >= target if higher_is_better(metric) else ratio <= target
                verdict = "%s %s %s" % ("met" if ok else "MISSED",
                                        ">=" if higher_is_better(metric) else "<=", fmt_num(target))
            if (case, metric) in GORT_TARGETS and g is not None:
                limit = GORT_TARGETS[(case, metric)]
                ok = g >= limit if higher_is_better(metric) else g <= limit
                own = "%s gort %s %s" % ("met" if ok else "MISSED",
                                        ">=" if higher_is_better(metric) else "<=", fmt_num(limit))
                verdict = own if not verdict else verdict + "; " + own
            rows.append({
                "case": case, "metric": metric, "gort": g, "go": o, "ratio": ratio,
                "gort_spread": spread(gv) if gv else None, "go_spread": spread(ov) if ov else None,
                "better": "higher" if higher_is_better(metric) else "lower",
                "target": verdict, "n": max(len(gv or []), len(ov or [])),
            })
    return rows


HEADER = ["benchmark", "metric", "gort", "Go", "gort/Go", "better", "target"]


def row_cells(r):
    def val(v, s):
        if v is None:
            return "n/a"
        return fmt_num(v) + (" ±%.0f%%" % s if s is not None else "")
    return [r["case"], r["metric"], val(r["gort"], r["gort_spread"]), val(r["go"], r["go_spread"]),
            "%.3f" % r["ratio"] if r["ratio"] is not None else "n/a", r["better"], r["target"]]


def text_table(rows):
    cells = [HEADER] + [row_cells(r) for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(HEADER))]
    lines = []
    for k, c in enumerate(cells):
        lines.append("  ".join(s.ljust(widths[i]) if i < 2 or i >= 5 else s.rjust(widths[i])
                               for i, s in enumerate(c)).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def md_table(rows):
    lines = ["| " + " | ".join(HEADER) + " |",
             "| --- | --- | ---: | ---: | ---: | --- | --- |"]
    for r in rows:
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in row_cells(r)) + " |")
    return "\n".join(lines)


def machine_info():
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return "%d CPUs (%s), Linux %s" % (os.cpu_count() or 0, model or platform.machine(),
                                       platform.release())


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "unknown"


def git_rev():
    try:
        rev = run_cmd(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT).strip()
        dirty = run_cmd(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT).strip()
        return rev + (" (with uncommitted changes)" if dirty else "")
    except BenchError:
        return "unknown"


def go_version():
    try:
        return run_cmd(["go", "version"]).strip()
    except (BenchError, OSError):
        return "go: unknown"


def md_section(rows, args, argv):
    now = datetime.datetime.now().astimezone()
    cmd = "bench/compare.py " + " ".join(argv)
    return "\n".join([
        MD_BEGIN,
        "<!-- Generated by bench/compare.py; edits between these markers are overwritten. -->",
        "",
        "- Date: %s" % now.strftime("%Y-%m-%d %H:%M %Z"),
        "- Machine: %s" % machine_info(),
        "- gort: commit %s, %s build" % (git_rev(), args.buildtype or "meson"),
        "- Go: %s" % go_version(),
        "- Command: `%s`" % cmd.strip(),
        "- Load average (1, 5, 15 min) before / after: %s / %s" % (args.load_before, loadavg()),
        "- Medians of %d run(s) per side, each case in a fresh process, gort and Go back to back;"
        " ±x%% is half the min–max range relative to the median." % args.repetitions,
        "",
        md_table(rows),
        "",
        MD_END,
    ])


def write_markdown(path, section):
    if os.path.exists(path):
        with open(path) as f:
            text = f.read()
    else:
        text = "# Benchmarks\n\n"
    # The markers count only on a line of their own, so that prose may name them.
    m = re.search(r"^%s[ \t]*$.*?^%s[ \t]*$" % (re.escape(MD_BEGIN), re.escape(MD_END)),
                  text, re.M | re.S)
    if m:
        text = text[:m.start()] + section + text[m.end():]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    d = os.path.dirname(path)
    if d:
        os.makedirs(d, exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def run_server_script(script, extra, build_dir, args, results):
    """Runs bench/<script> (http_compare or echo_compare) with --json and adds
    its cases to results, the C floor's CPU figures as "<case> vs C floor"
    rows; returns True on failure. Its progress goes straight to stderr."""
    out = os.path.join(build_dir, "bench-go", script + ".json")
    cmd = [os.path.join(BENCH, script), "--build-dir", build_dir, "--json", out] + extra
    cmd += ["--quick"] if args.quick else ["--runs", str(args.repetitions)]
    if args.no_build:
        cmd.append("--no-build")
    log(" ".join(cmd))
    try:
        if os.path.exists(out):
            os.remove(out)
        p = subprocess.run(cmd, cwd=ROOT, stdout=sys.stderr, timeout=None)
        if p.returncode != 0:
            log("FAILED %s: exit status %d" % (" ".join(cmd), p.returncode))
            return True
        with open(out) as f:
            cases = json.load(f)["cases"]
    except (OSError, ValueError, KeyError) as e:
        log("FAILED bench/%s: %s" % (script, e))
        return True
    # Sides other than gort, go and the C floor (http_compare
    # --trace-overhead's gort+trace and gort+flightrec, which this script
    # does not ask for) are not rows of this table.
    for case, sides in cases.items():
        results[case] = {"gort": sides["gort"], "go": sides["go"]}
        if C_SIDE in sides:
            cpu = [m for m in sides[C_SIDE] if "cpu_us/" in m]
            results[case + VS_C] = {"gort": {m: sides["gort"][m] for m in cpu},
                                    "go": {m: sides[C_SIDE][m] for m in cpu}}
    return False


def meson_buildtype(build_dir):
    try:
        opts = json.loads(run_cmd(["meson", "introspect", "--buildoptions", build_dir], cwd=ROOT))
        for o in opts:
            if o["name"] == "buildtype":
                return o["value"]
    except (BenchError, ValueError, OSError):
        pass
    return None


def main(argv):
    ap = argparse.ArgumentParser(
        description="Run gort's benchmarks and their Go twins side by side.",
        epilog="Ratios are gort/Go: below 1 gort is faster or smaller, except for metrics "
               "ending in /s (throughput), where above 1 is better.")
    ap.add_argument("--build-dir", default="build",
                    help="meson build directory (default: build); set up if missing")
    ap.add_argument("--filter", default="", metavar="REGEX",
                    help="run only cases whose name (e.g. spawn_join/procs:2) matches")
    ap.add_argument("--repetitions", "-r", type=int, default=None, metavar="N",
                    help="runs per case and side; medians are reported (default 5, 1 with --quick)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: workloads scaled to 1/10 and one repetition")
    ap.add_argument("--scale", type=float, default=None,
                    help="scale workload sizes by this factor (GORT_BENCH_SCALE)")
    ap.add_argument("--markdown", metavar="FILE",
                    help="also write the table into FILE between marker comments")
    ap.add_argument("--json", metavar="FILE", help="also write every raw measurement to FILE")
    ap.add_argument("--jobs", "-j", type=int, default=None, help="ninja -j for the C++ build")
    ap.add_argument("--no-build", action="store_true", help="use the existing binaries")
    ap.add_argument("--timeout", type=float, default=600, help="seconds allowed for one run")
    ap.add_argument("--http", action="store_true",
                    help="also run bench/http_compare (wrk against samples/http_server, its "
                         "Go twin and the C floor; requests/s and server CPU per request), "
                         "and again with --server-bound (each server limited to half a CPU); "
                         "--repetitions runs of 10 s per side, one of 2 s with --quick; "
                         "needs wrk, taskset and root")
    ap.add_argument("--echo", action="store_true",
                    help="also run bench/echo_compare (samples/echo_server, its Go twin and the "
                         "C floor under bench/echo_load.c; msgs/s and server CPU per message "
                         "with 1 and 2 Ps: ping-pong with 100 and 1,000 connections, and "
                         "streaming); --repetitions runs of 1.5 s per side and case, one of 1 s "
                         "with --quick; needs taskset")
    args = ap.parse_args(argv)
    if args.repetitions is None:
        args.repetitions = 1 if args.quick else 5
    if args.scale is None:
        args.scale = 0.1 if args.quick else 1.0
    if args.repetitions < 1:
        ap.error("--repetitions must be at least 1")
    try:
        flt = re.compile(args.filter)
    except re.error as e:
        ap.error("--filter: %s" % e)
    if shutil.which("go") is None:
        ap.error("go is not installed")

    build_dir = os.path.abspath(os.path.join(ROOT, args.build_dir)) \
        if not os.path.isabs(args.build_dir) else args.build_dir
    work = os.path.join(build_dir, "bench-go")
    names = programs()
    if not names:
        log("no benchmark programs found")
        return 1
    try:
        if args.no_build:
            # Only the programs whose two binaries were built: a partial
            # bench build (say gmp_bench alone) compares what it has.
            have = [n for n in names
                    if os.path.isfile(os.path.join(build_dir, "bench", n))
                    and os.path.isfile(os.path.join(work, "bin", n))]
            for n in sorted(set(names) - set(have)):
                log("note: %s: not built in %s; skipped" % (n, build_dir))
            names = have
            cpp_bins = {n: os.path.join(build_dir, "bench", n) for n in names}
            go_bins = {n: os.path.join(work, "bin", n) for n in names}
        else:
            cpp_bins = build_cpp(build_dir, names, args.jobs)
            go_bins = build_go(work, names)
    except BenchError as e:
        log("build failed: %s" % e)
        return 1
    args.buildtype = meson_buildtype(build_dir)

    # Pair the cases.
    plan = []
    for n in names:
        try:
            cpp_cases = list_cpp(cpp_bins[n])
            go_cases = list_go(go_bins[n])
        except (BenchError, OSError) as e:
            log("%s: cannot list cases: %s" % (n, e))
            return 1
        for c in sorted(set(cpp_cases) - set(go_cases)):
            if GORT_ONLY.search(c):
                if flt.search(c):
                    plan.append((n, c, cpp_cases[c]))
                continue
            log("note: %s: case %s has no Go twin; skipped" % (n, c))
        for c in sorted(set(go_cases) - set(cpp_cases)):
            log("note: %s: Go case %s has no C++ twin; skipped" % (n, c))
        for c in go_cases:
            if c in cpp_cases and flt.search(c):
                plan.append((n, c, cpp_cases[c]))
    if not plan and not (args.http or args.echo):
        log("no cases match --filter %r" % args.filter)
        return 1

    args.load_before = loadavg()
    results = {}
    raw = []
    failed = 0
    for n, case, gb_name in plan:
        env = case_env(case, args.scale)
        sides = {"gort": {}, "go": {}}
        ok = True
        for rep in range(args.repetitions):
            order = ["gort", "go"] if rep % 2 == 0 else ["go", "gort"]
            if GORT_ONLY.search(case):
                order = ["gort"]
            for side in order:
                try:
                    if side == "gort":
                        m = run_cpp_case(cpp_bins[n], gb_name, env, args.timeout)
                    else:
                        m = run_go_case(go_bins[n], case, env, args.timeout)
                except (BenchError, OSError, ValueError) as e:
                    log("FAILED %s (%s): %s" % (case, side, e))
                    ok = False
                    break
                raw.append({"case": case, "side": side, "rep": rep, "metrics": m})
                for k, v in m.items():
                    sides[side].setdefault(k, []).append(v)
            if not ok:
                break
            log("%-28s rep %d/%d  gort %s  go %s" % (
                case, rep + 1, args.repetitions,
                " ".join("%s=%s" % (k, fmt_num(v[-1])) for k, v in sides["gort"].items() if k != "ns/op"),
                " ".join("%s=%s" % (k, fmt_num(v[-1])) for k, v in sides["go"].items())))
        if ok:
            results[case] = sides
        else:
            failed += 1

    if args.http:
        failed += run_server_script("http_compare", ["--ceiling"], build_dir, args, results)
        failed += run_server_script("http_compare", ["--server-bound"], build_dir, args, results)
    if args.echo:
        failed += run_server_script("echo_compare", [], build_dir, args, results)

    rows = build_rows(results)
    print(text_table(rows))
    print("\nload average before / after: %s / %s" % (args.load_before, loadavg()))
    print("ratio = gort/Go; lower is better unless 'better' says higher (throughput). "
          "Medians of %d run(s), each in a fresh process; ±x%% = half the range / median."
          % args.repetitions)
    if failed:
        print("%d case(s) failed; see the messages above." % failed)
    if args.markdown:
        path = args.markdown if os.path.isabs(args.markdown) else os.path.join(os.getcwd(), args.markdown)
        write_markdown(path, md_section(rows, args, argv))
        log("wrote %s" % path)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"argv": argv, "scale": args.scale, "runs": raw}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
