// hook_bench is the Go twin of bench/hook_bench.cpp: what Go does where a
// C++ program calls libc's blocking functions on goroutines. The workloads
// and their parameters are the C++ program's (see the comment at its top);
// its library cases (hiredis, libpq, libcurl, Beast) have no twin.
package main

import (
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"gortbench/internal/harness"
)

// threadPeak samples the process's OS threads every millisecond until
// stop is called, and returns the most it saw.
func threadPeak() (stop func() int) {
	var peak atomic.Int64
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			if n := threads(); n > peak.Load() {
				peak.Store(n)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() int {
		close(done)
		<-finished
		return int(peak.Load())
	}
}

func threads() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "Threads:") {
			n, _ := strconv.ParseInt(strings.TrimSpace(line[len("Threads:"):]), 10, 64)
			return n
		}
	}
	return -1
}

func libcSleep(r *harness.Result) {
	n := harness.Scaled(10_000)
	stop := threadPeak()
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			time.Sleep(200 * time.Millisecond)
			wg.Done()
		}()
	}
	wg.Wait()
	d := time.Since(start)
	r.Report("ms", float64(d.Nanoseconds())/1e6)
	r.Report("os_threads", float64(stop()))
}

func pipeReaders(r *harness.Result) {
	n := harness.Scaled(2_000)
	type pipe struct{ r, w *os.File }
	pipes := make([]pipe, n)
	for i := range pipes {
		pr, pw, err := os.Pipe()
		if err != nil {
			panic(err)
		}
		pipes[i] = pipe{pr, pw}
	}
	stop := threadPeak()
	var wg sync.WaitGroup
	var got atomic.Int64
	start := time.Now()
	for _, p := range pipes {
		wg.Add(1)
		go func(f *os.File) {
			var b [1]byte
			if n, _ := f.Read(b[:]); n == 1 {
				got.Add(1)
			}
			wg.Done()
		}(p.r)
	}
	time.Sleep(300 * time.Millisecond)
	for _, p := range pipes {
		if _, err := p.w.Write([]byte{'x'}); err != nil {
			panic(err)
		}
	}
	wg.Wait()
	d := time.Since(start)
	if got.Load() != int64(n) {
		panic("a reader got nothing")
	}
	r.Report("ms", float64(d.Nanoseconds())/1e6)
	r.Report("os_threads", float64(stop()))
	for _, p := range pipes {
		p.r.Close()
		p.w.Close()
	}
}

// eventfdRead: read(2) on a ready eventfd through Go's system-call path
// (syscall.Read: entersyscall and exitsyscall around it), the median of
// three rounds.
func eventfdRead(r *harness.Result) {
	n := harness.Scaled(2_000_000)
	const efdSemaphore, efdCloexec = 1, 0o2000000
	fd, _, errno := syscall.Syscall(syscall.SYS_EVENTFD2, 0, efdSemaphore|efdCloexec, 0)
	if errno != 0 {
		panic(errno)
	}
	big := []byte{0, 0, 0, 0, 0, 0, 0, 0x10}
	if _, err := syscall.Write(int(fd), big); err != nil {
		panic(err)
	}
	var v [8]byte
	var rounds []float64
	for k := 0; k < 3; k++ {
		start := time.Now()
		for i := 0; i < n; i++ {
			syscall.Read(int(fd), v[:])
		}
		rounds = append(rounds, float64(time.Since(start).Nanoseconds())/float64(n))
	}
	sort.Float64s(rounds)
	r.Report("ns/read", rounds[1])
	syscall.Close(int(fd))
}

func main() {
	harness.Main([]harness.Case{
		{Workload: "libc_sleep", Procs: 2, Run: libcSleep},
		{Workload: "pipe_readers", Procs: 2, Run: pipeReaders},
		{Workload: "eventfd_read", Procs: 1, Run: eventfdRead},
	})
}
