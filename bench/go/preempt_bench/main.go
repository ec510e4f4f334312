// preempt_bench is the Go twin of bench/preempt_bench.cpp: how late a
// sleeping goroutine wakes while call-free loops hog the Ps, and the cost of
// sysmon to a CPU-bound program. The workloads and their parameters are the
// C++ program's, case for case (see the comment at its top).
//
// Go has no time-slice knob (forcePreemptNS is a constant 10 ms), so
// latency_slice1ms runs exactly the latency workload: its row compares
// gort's 1 ms slice with Go's fixed 10 ms. The gort-only overhead metrics of
// sysmon_overhead (against preemption off, against plain threads) have no Go
// counterpart.
package main

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"gortbench/internal/harness"
)

const (
	sleeps         = 200
	chainSteps     = 240_000_000
	overheadRounds = 5
)

var sink atomic.Uint64

// spin is the spinners' loop: atomic.Bool.Load and the counter are inlined,
// so the loop makes no calls and only asynchronous preemption stops it.
func spin(stop *atomic.Bool, counter *uint64) {
	for !stop.Load() {
		*counter++
	}
}

func percentile(v []float64, q float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	i := int(q*float64(len(s)-1) + 0.5)
	if i > len(s)-1 {
		i = len(s) - 1
	}
	return s[i]
}

func latency(spinners int) func(r *harness.Result) {
	return func(r *harness.Result) {
		n := harness.Scaled(sleeps)
		var stop atomic.Bool
		counters := make([]uint64, spinners*8) // a cache line apart
		var wg sync.WaitGroup
		for i := 0; i < spinners; i++ {
			wg.Add(1)
			go func(c *uint64) {
				spin(&stop, c)
				wg.Done()
			}(&counters[i*8])
		}
		late := make([]float64, 0, n)
		for i := 0; i < n; i++ {
			start := time.Now()
			time.Sleep(time.Millisecond)
			late = append(late, float64(time.Since(start).Nanoseconds())/1e3-1000)
		}
		stop.Store(true)
		wg.Wait()
		r.Report("lateness_p50_us", percentile(late, 0.50))
		r.Report("lateness_p99_us", percentile(late, 0.99))
		r.Report("lateness_max_us", percentile(late, 1.0))
	}
}

// chain is the C++ program's hash chain, step for step.
func chain(x uint64, steps int) uint64 {
	for i := 0; i < steps; i++ {
		x = x*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019
		x ^= x >> 29
	}
	return x
}

func chains(procs, steps int) time.Duration {
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < procs; i++ {
		wg.Add(1)
		go func(i int) {
			sink.Add(chain(uint64(i)+1, steps))
			wg.Done()
		}(i)
	}
	wg.Wait()
	return time.Since(start)
}

func sysmonOverhead(procs int) func(r *harness.Result) {
	return func(r *harness.Result) {
		steps := harness.Scaled(chainSteps)
		var secs []float64
		for i := 0; i < overheadRounds; i++ {
			secs = append(secs, chains(procs, steps).Seconds())
		}
		r.Report("ns/iter", percentile(secs, 0.5)*1e9/float64(steps))
	}
}

func main() {
	harness.Main([]harness.Case{
		{Workload: "latency", Procs: 1, Run: latency(1)},
		{Workload: "latency_slice1ms", Procs: 1, Run: latency(1)},
		{Workload: "latency", Procs: 2, Run: latency(2)},
		{Workload: "sysmon_overhead", Procs: 2, Run: sysmonOverhead(2)},
	})
}
