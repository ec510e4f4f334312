// chan_bench is the Go twin of bench/chan_bench.cpp: channels, select and
// the sync package. The workloads and their parameters are the C++
// program's, case for case (see the comment at its top).
package main

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"gortbench/internal/harness"
)

const (
	roundTrips      = 1_000_000
	items           = 10_000_000
	bufferedCap     = 1024
	selectMessages  = 1_000_000
	mutexGoroutines = 100
	locks           = 10_000_000
	fanin           = 100_000
)

// sink keeps the readers' sums alive (the C++ twin: benchmark::DoNotOptimize).
var sink atomic.Int64

// share splits n into parts shares that differ by at most one.
func share(n, parts, i int) int {
	s := n / parts
	if i < n%parts {
		s++
	}
	return s
}

// expectedSum is the sum of 0..k-1 over every share.
func expectedSum(n, parts int) int64 {
	var s int64
	for i := 0; i < parts; i++ {
		k := int64(share(n, parts, i))
		s += k * (k - 1) / 2
	}
	return s
}

// check fails the run as the C++ side's SkipWithError does: bench/compare
// then reports the case as broken instead of timing a wrong answer.
func check(ok bool, what string) {
	if !ok {
		fmt.Fprintln(os.Stderr, what)
		os.Exit(1)
	}
}

func pingpong(r *harness.Result) {
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
	check(sum == int64(n)*int64(n-1)/2, "pingpong: wrong sum")
	r.Report("ns/roundtrip", float64(d.Nanoseconds())/float64(n))
}

func buffered(producers, consumers int) func(r *harness.Result) {
	return func(r *harness.Result) {
		n := harness.Scaled(items)
		ch := make(chan int64, bufferedCap)
		var sum atomic.Int64
		var producing atomic.Int32
		producing.Store(int32(producers))
		var consumed sync.WaitGroup
		start := time.Now()
		consumed.Add(consumers)
		for c := 0; c < consumers; c++ {
			go func() {
				var local int64
				for v := range ch {
					local += v
				}
				sum.Add(local)
				consumed.Done()
			}()
		}
		for p := 0; p < producers; p++ {
			k := share(n, producers, p)
			go func() {
				for i := 0; i < k; i++ {
					ch <- int64(i)
				}
				if producing.Add(-1) == 0 {
					close(ch)
				}
			}()
		}
		consumed.Wait()
		d := time.Since(start)
		check(sum.Load() == expectedSum(n, producers), "buffered: wrong sum")
		r.Report("ns/item", float64(d.Nanoseconds())/float64(n))
	}
}

func select4(r *harness.Result) {
	n := harness.Scaled(selectMessages)
	var chs [4]chan int64
	for i := range chs {
		chs[i] = make(chan int64)
	}
	var sum int64
	start := time.Now()
	for i := range chs {
		ch, k := chs[i], share(n, 4, i)
		go func() {
			for j := 0; j < k; j++ {
				ch <- int64(j)
			}
		}()
	}
	for m := 0; m < n; m++ {
		select {
		case v := <-chs[0]:
			sum += v
		case v := <-chs[1]:
			sum += v
		case v := <-chs[2]:
			sum += v
		case v := <-chs[3]:
			sum += v
		}
	}
	d := time.Since(start)
	check(sum == expectedSum(n, 4), "select4: wrong sum")
	r.Report("ns/message", float64(d.Nanoseconds())/float64(n))
}

func mutex100(r *harness.Result) {
	n := harness.Scaled(locks)
	var mu sync.Mutex
	var wg sync.WaitGroup
	var counter int64
	start := time.Now()
	wg.Add(mutexGoroutines)
	for g := 0; g < mutexGoroutines; g++ {
		k := share(n, mutexGoroutines, g)
		go func() {
			for i := 0; i < k; i++ {
				mu.Lock()
				counter++
				mu.Unlock()
			}
			wg.Done()
		}()
	}
	wg.Wait()
	d := time.Since(start)
	check(counter == int64(n), "mutex100: lost increments")
	r.Report("ns/lock", float64(d.Nanoseconds())/float64(n))
}

func rwmutex100(r *harness.Result) {
	n := harness.Scaled(locks)
	var mu sync.RWMutex
	var wg sync.WaitGroup
	var counter, writes int64
	start := time.Now()
	wg.Add(mutexGoroutines)
	for g := 0; g < mutexGoroutines; g++ {
		k := share(n, mutexGoroutines, g)
		go func() {
			var mine, seen int64
			for i := 0; i < k; i++ {
				if i%10 == 0 {
					mu.Lock()
					counter++
					mu.Unlock()
					mine++
				} else {
					mu.RLock()
					seen += counter
					mu.RUnlock()
				}
			}
			sink.Add(seen)
			atomic.AddInt64(&writes, mine)
			wg.Done()
		}()
	}
	wg.Wait()
	d := time.Since(start)
	check(counter == atomic.LoadInt64(&writes), "rwmutex100: lost increments")
	r.Report("ns/access", float64(d.Nanoseconds())/float64(n))
}

func waitgroupFanin(r *harness.Result) {
	n := harness.Scaled(fanin)
	var wg sync.WaitGroup
	start := time.Now()
	wg.Add(n)
	for i := 0; i < n; i++ {
		go func() { wg.Done() }()
	}
	wg.Wait()
	d := time.Since(start)
	r.Report("ns/goroutine", float64(d.Nanoseconds())/float64(n))
}

func main() {
	harness.Main([]harness.Case{
		{Workload: "pingpong", Procs: 1, Run: pingpong},
		{Workload: "pingpong", Procs: 2, Run: pingpong},
		{Workload: "buffered_1x1", Procs: 2, Run: buffered(1, 1)},
		{Workload: "buffered_4x4", Procs: 2, Run: buffered(4, 4)},
		{Workload: "select4", Procs: 2, Run: select4},
		{Workload: "mutex100", Procs: 2, Run: mutex100},
		{Workload: "rwmutex100", Procs: 2, Run: rwmutex100},
		{Workload: "waitgroup_fanin", Procs: 2, Run: waitgroupFanin},
	})
}
