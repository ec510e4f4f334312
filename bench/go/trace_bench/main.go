// trace_bench is the Go twin of bench/trace_bench.cpp: what Go 1.19's
// execution tracer (runtime/trace) costs a goroutine switch. The workloads
// and their parameters are the C++ program's, case for case (see the
// comment at its top). Go has no pingpong_traced_nostacks (its tracer
// cannot leave the stacks out) and no pingpong_flightrec (Go 1.19 has no
// flight recorder): bench/compare runs those for gort alone.
//
// The traced slices run between trace.Start, with a writer that counts the
// bytes and drops them, and trace.Stop, which returns once the writer has
// had everything; neither is timed. Go has no events/roundtrip counter:
// counting would mean parsing its format.
package main

import (
	"fmt"
	"os"
	"runtime/trace"
	"sync/atomic"
	"time"

	"gortbench/internal/harness"
)

const (
	roundTrips = 1_000_000
	// Slices of a traced case: half untraced, half traced, alternating.
	slices = 10
	// A block, an unblock and a start per goroutine and round trip.
	eventsPerRoundTrip = 6
)

// check fails the run as the C++ side's SkipWithError does: bench/compare
// then reports the case as broken instead of timing a wrong answer.
func check(ok bool, what string) {
	if !ok {
		fmt.Fprintln(os.Stderr, what)
		os.Exit(1)
	}
}

// share splits n into parts shares that differ by at most one.
func share(n, parts, i int) int {
	s := n / parts
	if i < n%parts {
		s++
	}
	return s
}

func pingpongUntraced(r *harness.Result) {
	n := harness.Scaled(roundTrips)
	ping := make(chan int64)
	pong := make(chan int64)
	var sum int64
	start := time.Now()
	go func() {
		for v := range ping {
			pong <- v
		}
	}()
	for i := 0; i < n; i++ {
		ping <- int64(i)
		sum += <-pong
	}
	d := time.Since(start)
	close(ping)
	check(sum == int64(n)*int64(n-1)/2, "pingpong_untraced: wrong sum")
	r.Report("ns/roundtrip", float64(d.Nanoseconds())/float64(n))
}

// countingWriter counts what the tracer writes and drops it. The tracer's
// reader goroutine calls Write; the case reads the count after trace.Stop.
type countingWriter struct{ n atomic.Int64 }

func (w *countingWriter) Write(p []byte) (int, error) {
	w.n.Add(int64(len(p)))
	return len(p), nil
}

func pingpongTraced(r *harness.Result) {
	n := harness.Scaled(roundTrips)
	ping := make(chan int64)
	pong := make(chan int64)
	go func() {
		for v := range ping {
			pong <- v
		}
	}()
	var sum, sent int64
	exchange := func(k int) {
		for i := 0; i < k; i++ {
			ping <- sent
			sum += <-pong
			sent++
		}
	}
	// Untimed: the first slice, untraced, would otherwise pay for the
	// partner's first run alone.
	warm := n / 100
	if warm < 1 {
		warm = 1
	}
	exchange(warm)
	var untraced, traced time.Duration
	var w countingWriter
	for s := 0; s < slices; s++ {
		// Pairs alternate which half goes first: U T, T U, U T, ...
		isTraced := (s%2 == 1) != ((s/2)%2 == 1)
		k := share(n, slices/2, s/2)
		if isTraced {
			if err := trace.Start(&w); err != nil {
				check(false, "trace.Start: "+err.Error())
			}
		}
		start := time.Now()
		exchange(k)
		d := time.Since(start)
		if isTraced {
			traced += d
			trace.Stop()
		} else {
			untraced += d
		}
	}
	close(ping)
	check(sum == sent*(sent-1)/2, "pingpong_traced: wrong sum")
	bytes := float64(w.n.Load())
	check(bytes > 0, "pingpong_traced: the tracer wrote nothing")
	nf := float64(n)
	extra := float64(traced.Nanoseconds()-untraced.Nanoseconds()) / nf
	r.Report("ns/roundtrip", float64(traced.Nanoseconds())/nf)
	r.Report("untraced_ns/roundtrip", float64(untraced.Nanoseconds())/nf)
	r.Report("overhead_ns/roundtrip", extra)
	r.Report("overhead_pct", 100*float64(traced.Nanoseconds()-untraced.Nanoseconds())/float64(untraced.Nanoseconds()))
	r.Report("ns/event", extra/eventsPerRoundTrip)
	r.Report("bytes/roundtrip", bytes/nf)
	r.Report("bytes/event", bytes/nf/eventsPerRoundTrip)
}

func main() {
	harness.Main([]harness.Case{
		{Workload: "pingpong_untraced", Procs: 1, Run: pingpongUntraced},
		{Workload: "pingpong_untraced", Procs: 2, Run: pingpongUntraced},
		{Workload: "pingpong_traced", Procs: 1, Run: pingpongTraced},
		{Workload: "pingpong_traced", Procs: 2, Run: pingpongTraced},
	})
}
