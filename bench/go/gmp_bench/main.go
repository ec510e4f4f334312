// gmp_bench is the Go twin of bench/gmp_bench.cpp: spawning, switching, and
// the memory a parked goroutine costs. The workloads and their parameters
// are the C++ program's, case for case (see the comment at its top).
package main

import (
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"gortbench/internal/harness"
)

const (
	goroutines        = 1_000_000
	burstGoroutines   = 100_000
	sleeperGoroutines = 10_000
	yields            = 1_000_000
	locks             = 10_000_000
)

// spawnJoinRound runs one round of spawn+join and returns its duration.
func spawnJoinRound(n int) time.Duration {
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() { wg.Done() }()
	}
	wg.Wait()
	return time.Since(start)
}

func spawnJoin(warm bool) func(r *harness.Result) {
	return func(r *harness.Result) {
		n := harness.Scaled(goroutines)
		if warm {
			spawnJoinRound(n)
		}
		d := spawnJoinRound(n)
		r.Report("ns/goroutine", float64(d.Nanoseconds())/float64(n))
		r.Report("peak_rss_MiB", harness.MiB(harness.PeakRSSBytes()))
	}
}

func yieldPing(r *harness.Result) {
	n := harness.Scaled(yields)
	var done atomic.Bool
	start := time.Now()
	go func() {
		for i := 0; i < n; i++ {
			runtime.Gosched()
		}
		done.Store(true)
	}()
	for i := 0; i < n; i++ {
		runtime.Gosched()
	}
	for !done.Load() {
		runtime.Gosched()
	}
	d := time.Since(start)
	r.Report("ns/switch", float64(d.Nanoseconds())/float64(2*n))
}

// memoryBytes is what the process holds: resident pages and page tables.
func memoryBytes() int64 { return harness.RSSBytes() + harness.PageTableBytes() }

// parkAndWake: n goroutines park on one channel, then its close wakes them.
func parkAndWake(r *harness.Result, n int, perGoroutine bool) {
	ch := make(chan int)
	var started, finished sync.WaitGroup
	before := memoryBytes()
	pteBefore := harness.PageTableBytes()
	start := time.Now()
	for i := 0; i < n; i++ {
		started.Add(1)
		finished.Add(1)
		go func() {
			started.Done()
			<-ch
			finished.Done()
		}()
	}
	started.Wait()
	spawn := time.Since(start)
	delta := memoryBytes() - before
	pteDelta := harness.PageTableBytes() - pteBefore
	wakeStart := time.Now()
	close(ch)
	finished.Wait()
	wake := time.Since(wakeStart)
	r.Report("bytes/goroutine", float64(delta)/float64(n))
	r.Report("pte_bytes/goroutine", float64(pteDelta)/float64(n))
	if perGoroutine {
		r.Report("us/goroutine", float64(spawn.Nanoseconds())/1e3/float64(n))
	} else {
		r.Report("spawn_ms", float64(spawn.Microseconds())/1e3)
	}
	r.Report("wake_ms", float64(wake.Microseconds())/1e3)
	r.Report("peak_rss_MiB", harness.MiB(harness.PeakRSSBytes()))
}

func parked(r *harness.Result) { parkAndWake(r, harness.Scaled(goroutines), false) }

func burst(r *harness.Result) { parkAndWake(r, harness.Scaled(burstGoroutines), true) }

// burstN: the first burst at a smaller size (a fresh process's first go,
// small bursts).
func burstN(n int) func(*harness.Result) {
	return func(r *harness.Result) { parkAndWake(r, harness.Scaled(n), true) }
}

// sleepers: the i-th of n goroutines sleeps i % 99 ms as it starts.
func sleepers(r *harness.Result) {
	n := harness.Scaled(sleeperGoroutines)
	var wg sync.WaitGroup
	// Each goroutine writes its lateness to its own slot; sorted once all
	// have been joined, for the worst and the 99th percentile.
	late := make([]int64, n)
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			d := time.Duration(i%99) * time.Millisecond
			t0 := time.Now()
			time.Sleep(d)
			late[i] = int64(time.Since(t0) - d)
			wg.Done()
		}(i)
	}
	spawn := time.Since(start)
	wg.Wait()
	sort.Slice(late, func(a, b int) bool { return late[a] < late[b] })
	// floor(0.99 (n - 1)) in integers, as the C++ side computes it.
	p99 := late[(n-1)*99/100]
	r.Report("spawn_ms", float64(spawn.Microseconds())/1e3)
	r.Report("late_max_ms", float64(late[n-1])/1e6)
	r.Report("late_p99_ms", float64(p99)/1e6)
}

func skynetNode(up chan int64, num, size int64) {
	if size == 1 {
		up <- num
		return
	}
	rc := make(chan int64, 10)
	for i := int64(0); i < 10; i++ {
		go skynetNode(rc, num+i*(size/10), size/10)
	}
	var sum int64
	for i := 0; i < 10; i++ {
		sum += <-rc
	}
	up <- sum
}

// skynetRound runs one round of `size` leaves; -1 if the sum is wrong.
func skynetRound(size int64) time.Duration {
	start := time.Now()
	c := make(chan int64, 1)
	go skynetNode(c, 0, size)
	sum := <-c
	d := time.Since(start)
	if sum != size*(size-1)/2 {
		return -1
	}
	return d
}

func skynet(r *harness.Result) {
	size := int64(10)
	for size*10 <= int64(harness.Scaled(goroutines)) {
		size *= 10
	}
	cold := skynetRound(size)
	warm := []time.Duration{skynetRound(size), skynetRound(size), skynetRound(size)}
	sort.Slice(warm, func(i, j int) bool { return warm[i] < warm[j] })
	if cold < 0 || warm[0] < 0 {
		panic("skynet: wrong sum")
	}
	r.Report("ms", float64(warm[1].Microseconds())/1e3)
	r.Report("cold_ms", float64(cold.Microseconds())/1e3)
	r.Report("peak_rss_MiB", harness.MiB(harness.PeakRSSBytes()))
}

// osMutex: an uncontended sync.Mutex locked and unlocked `locks` times.
func osMutex(r *harness.Result) {
	n := harness.Scaled(locks)
	var mu sync.Mutex
	start := time.Now()
	for i := 0; i < n; i++ {
		mu.Lock()
		mu.Unlock()
	}
	d := time.Since(start)
	r.Report("ns/lock", float64(d.Nanoseconds())/float64(n))
}

const resizes = 400

// setProcs: the pause of GOMAXPROCS(n)'s stop of the world while two
// goroutines spin in call-free loops; switches between 1 and 2 Ps.
func setProcs(r *harness.Result) {
	n := harness.Scaled(resizes)
	procs := runtime.GOMAXPROCS(0)
	var stop atomic.Bool
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			x := uint64(0)
			for !stop.Load() {
				for k := 0; k < 1000; k++ {
					x = x*33 + uint64(k)
				}
				sink.Store(x)
			}
			wg.Done()
		}()
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		runtime.GOMAXPROCS(1 + i%procs)
	}
	d := time.Since(start)
	stop.Store(true)
	wg.Wait()
	runtime.GOMAXPROCS(procs)
	r.Report("us/call", float64(d.Microseconds())/float64(n))
}

var sink atomic.Uint64

func main() {
	harness.Main([]harness.Case{
		{Workload: "spawn_join", Procs: 2, Run: spawnJoin(false)},
		{Workload: "spawn_join_warm", Procs: 2, Run: spawnJoin(true)},
		{Workload: "yield_ping", Procs: 1, Run: yieldPing},
		{Workload: "parked", Procs: 2, Run: parked},
		{Workload: "burst", Procs: 2, Run: burst},
		{Workload: "burst_1", Procs: 2, Run: burstN(1)},
		{Workload: "burst_100", Procs: 2, Run: burstN(100)},
		{Workload: "burst_10k", Procs: 2, Run: burstN(10_000)},
		{Workload: "sleepers", Procs: 2, Run: sleepers},
		{Workload: "skynet", Procs: 2, Run: skynet},
		{Workload: "os_mutex", Procs: 1, Run: osMutex},
		{Workload: "set_procs", Procs: 2, Run: setProcs},
	})
}
