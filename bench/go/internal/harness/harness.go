// Package harness is the Go side of bench/bench_util.hpp: case names,
// workload scaling, memory figures and the JSON-lines output that
// bench/compare reads.
//
// A program lists its cases and calls Main:
//
//	harness.Main([]harness.Case{
//		{Workload: "yield_ping", Procs: 1, Run: yieldPing},
//	})
//
// Flags: -list prints the case names ("<workload>/procs:<N>"), one a line;
// -run REGEX runs the matching cases (default: all) and prints one JSON
// object per metric: {"name": ..., "metric": ..., "value": ...}. Metric
// names carry their unit ("ns/goroutine", "peak_rss_MiB"); lower is better
// except for names ending in "/s". bench/compare runs one case per process,
// so that peak RSS (VmHWM) belongs to that case alone.
package harness

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Case is one workload run with Procs Ps (GOMAXPROCS).
type Case struct {
	Workload string
	Procs    int
	Run      func(r *Result)
}

// Name is the case's name, identical to the C++ side's.
func (c Case) Name() string { return fmt.Sprintf("%s/procs:%d", c.Workload, c.Procs) }

// Result collects a case's metrics.
type Result struct {
	name    string
	metrics []metric
}

type metric struct {
	Name   string  `json:"name"`
	Metric string  `json:"metric"`
	Value  float64 `json:"value"`
}

// Report records one metric of the case.
func (r *Result) Report(name string, value float64) {
	r.metrics = append(r.metrics, metric{r.name, name, value})
}

// Op measures f as a testing.B benchmark and reports its ns/op, for cases
// compared with a Google Benchmark loop of the same operation.
func (r *Result) Op(f func(b *testing.B)) {
	res := testing.Benchmark(f)
	r.Report("ns/op", float64(res.T.Nanoseconds())/float64(res.N))
}

// Scale returns GORT_BENCH_SCALE (default 1; a value that is not positive
// counts as 1), for fixed durations.
func Scale() float64 {
	if s := os.Getenv("GORT_BENCH_SCALE"); s != "" {
		if v, err := strconv.ParseFloat(s, 64); err == nil && v > 0 {
			return v
		}
	}
	return 1.0
}

// Scaled returns n scaled by GORT_BENCH_SCALE (default 1), at least 1.
func Scaled(n int) int {
	v := int(float64(n) * Scale())
	if v < 1 {
		v = 1
	}
	return v
}

// CPUSeconds is the CPU time of the whole process so far, user + system,
// every thread (getrusage RUSAGE_SELF, as gortbench::process_cpu_seconds).
func CPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

// RSSBytes is the resident set size now, from /proc/self/statm.
func RSSBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return -1
	}
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return -1
	}
	return pages * int64(os.Getpagesize())
}

// statusBytes is a "Name:   N kB" field of /proc/self/status, in bytes.
func statusBytes(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, field+":") {
			f := strings.Fields(line[len(field)+1:])
			if len(f) == 0 {
				return -1
			}
			kib, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return -1
			}
			return kib * 1024
		}
	}
	return -1
}

// PeakRSSBytes is the peak resident set size (VmHWM) of this process.
func PeakRSSBytes() int64 { return statusBytes("VmHWM") }

// PageTableBytes is the size of this process's page tables (VmPTE).
func PageTableBytes() int64 { return statusBytes("VmPTE") }

// MiB converts bytes to mebibytes.
func MiB(b int64) float64 { return float64(b) / (1024 * 1024) }

// Main parses the flags and runs or lists the cases.
func Main(cases []Case) {
	list := flag.Bool("list", false, "print the case names and exit")
	run := flag.String("run", "", "run only the cases whose name matches this regular expression")
	flag.Parse()
	re, err := regexp.Compile(*run)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bad -run: %v\n", err)
		os.Exit(2)
	}
	out := json.NewEncoder(os.Stdout)
	for _, c := range cases {
		if !re.MatchString(c.Name()) {
			continue
		}
		if *list {
			fmt.Println(c.Name())
			continue
		}
		// bench/compare starts the process with GOMAXPROCS already set;
		// this covers a direct run.
		if runtime.GOMAXPROCS(0) != c.Procs {
			runtime.GOMAXPROCS(c.Procs)
		}
		r := &Result{name: c.Name()}
		c.Run(r)
		for _, m := range r.metrics {
			if err := out.Encode(m); err != nil {
				os.Exit(1)
			}
		}
	}
}
