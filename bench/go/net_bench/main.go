// net_bench is the Go twin of bench/net_bench.cpp: TCP round trips, the
// memory an idle connection costs, mass sleeping, and deadlines pushed back
// per message. The workloads and their parameters are the C++ program's,
// case for case (see the comment at its top). All traffic stays on
// 127.0.0.1.
package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"gortbench/internal/harness"
)

const (
	echoRoundTrips = 200_000
	echoClients    = 100
	echoMessage    = 64
	serverBuffer   = 4096
	idleConns      = 10_000
	sleepers       = 100_000
	maxSleepMs     = 50
	timerOps       = 100_000
	rearmTimers    = 100_000
	rearmRounds    = 10
	deadlineFiles  = 5_000
	deadlineRounds = 20
	// Far enough that no deadline of timer_rearm or deadline_rearm comes due
	// while the case runs: every reset moves an armed timer later.
	readDeadline = 30 * time.Second
)

// fail ends a case that cannot produce numbers; bench/compare shows the
// message with the failure.
func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(3)
}

// echo echoes everything it reads until end of stream or an error.
func echo(c net.Conn) {
	defer c.Close()
	buf := make([]byte, serverBuffer)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			if _, werr := c.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// echoServer listens on 127.0.0.1:<free port> and serves every connection
// with echo in its own goroutine.
type echoServer struct {
	ln      net.Listener
	all     sync.WaitGroup
	started atomic.Int64
}

func startEchoServer() *echoServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fail("listen: %v", err)
	}
	s := &echoServer{ln: ln}
	s.all.Add(1)
	go func() {
		defer s.all.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed by stop
			}
			s.all.Add(1)
			go func() {
				s.started.Add(1)
				echo(c)
				s.all.Done()
			}()
		}
	}()
	return s
}

func (s *echoServer) addr() string { return s.ln.Addr().String() }

// waitStarted waits until n connections have been accepted and their
// goroutines are about to read.
func (s *echoServer) waitStarted(n int64) {
	for s.started.Load() < n {
		time.Sleep(time.Millisecond)
	}
}

// stop closes the listener and waits for every goroutine; the clients must
// have closed their ends first.
func (s *echoServer) stop() {
	s.ln.Close()
	s.all.Wait()
}

func tcpEcho(r *harness.Result) {
	total := harness.Scaled(echoRoundTrips)
	perClient := total / echoClients
	if perClient < 1 {
		perClient = 1
	}
	srv := startEchoServer()
	conns := make([]net.Conn, 0, echoClients)
	for i := 0; i < echoClients; i++ {
		c, err := net.Dial("tcp", srv.addr())
		if err != nil {
			fail("tcp_echo: %v", err)
		}
		conns = append(conns, c)
	}
	var wg sync.WaitGroup
	var failed atomic.Bool
	var firstErr atomic.Value
	start := time.Now()
	for _, c := range conns {
		wg.Add(1)
		go func(c net.Conn) {
			defer wg.Done()
			msg := make([]byte, echoMessage)
			for i := range msg {
				msg[i] = 'x'
			}
			back := make([]byte, echoMessage)
			for i := 0; i < perClient && !failed.Load(); i++ {
				if _, err := c.Write(msg); err != nil {
					firstErr.CompareAndSwap(nil, fmt.Errorf("client write: %w", err))
					failed.Store(true)
					return
				}
				if _, err := io.ReadFull(c, back); err != nil {
					firstErr.CompareAndSwap(nil, fmt.Errorf("client read: %w", err))
					failed.Store(true)
					return
				}
			}
		}(c)
	}
	wg.Wait()
	d := time.Since(start)
	for _, c := range conns {
		c.Close()
	}
	srv.stop()
	if failed.Load() {
		fail("tcp_echo: %v", firstErr.Load())
	}
	r.Report("msgs/s", float64(perClient*echoClients)/d.Seconds())
}

// raiseNofile raises the soft RLIMIT_NOFILE to the hard limit (Go 1.19 does
// it at start-up too) and returns the limit now in effect.
func raiseNofile() uint64 {
	var rl syscall.Rlimit
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl)
	rl.Cur = rl.Max
	syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl)
	return rl.Cur
}

// idleClientEnv, when set to "<addr> <n>", makes this program the client
// process of idle_conns instead of running cases.
const idleClientEnv = "GORTBENCH_IDLE_CLIENT"

// idleClient opens n connections to addr, prints "ok" (or the error) on
// stdout, then holds them until stdin reaches end of file. On "wake" it
// writes one byte on every connection, reads the echo of each, and prints
// "woke <ns>": the time from the first write to the last echo.
func idleClient(spec string) {
	raiseNofile()
	var addr string
	var n int
	if _, err := fmt.Sscanf(spec, "%s %d", &addr, &n); err != nil {
		fmt.Printf("error: bad %s: %v\n", idleClientEnv, err)
		os.Exit(1)
	}
	conns := make([]net.Conn, 0, n)
	for i := 0; i < n; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			fmt.Printf("error: client dial #%d: %v\n", i, err)
			os.Exit(1)
		}
		conns = append(conns, c)
	}
	fmt.Println("ok")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if in.Text() != "wake" {
			continue
		}
		start := time.Now()
		ok := true
		one := []byte{'w'}
		for _, c := range conns {
			if _, err := c.Write(one); err != nil {
				ok = false
			}
		}
		buf := make([]byte, 1)
		for _, c := range conns {
			if _, err := io.ReadFull(c, buf); err != nil {
				ok = false
			}
		}
		if ok {
			fmt.Printf("woke %d\n", time.Since(start).Nanoseconds())
		} else {
			fmt.Println("error: wake")
		}
	}
	os.Exit(0) // the kernel closes the connections
}

func idle(r *harness.Result) {
	n := harness.Scaled(idleConns)
	// This process holds the server ends only; the client process the others.
	need := uint64(n + 64)
	if have := raiseNofile(); have < need {
		fail("idle_conns: needs %d descriptors, RLIMIT_NOFILE allows %d", need, have)
	}
	srv := startEchoServer()
	before := harness.RSSBytes()
	self, err := os.Executable()
	if err != nil {
		fail("idle_conns: %v", err)
	}
	client := exec.Command(self)
	client.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d", idleClientEnv, srv.addr(), n))
	client.Stderr = os.Stderr
	toClient, err := client.StdinPipe()
	if err != nil {
		fail("idle_conns: %v", err)
	}
	fromClient, err := client.StdoutPipe()
	if err != nil {
		fail("idle_conns: %v", err)
	}
	if err := client.Start(); err != nil {
		fail("idle_conns: starting the client process: %v", err)
	}
	replies := bufio.NewReader(fromClient)
	report, _ := replies.ReadString('\n')
	if strings.TrimSpace(report) != "ok" {
		fail("idle_conns: client process: %q", report)
	}
	srv.waitStarted(int64(n))
	delta := harness.RSSBytes() - before
	// Wake every idle connection at once: one byte each, echoed.
	io.WriteString(toClient, "wake\n")
	woke, _ := replies.ReadString('\n')
	var wakeNs int64
	if _, err := fmt.Sscanf(woke, "woke %d", &wakeNs); err != nil {
		fail("idle_conns: client process: %q", woke)
	}
	r.Report("wake_ms", float64(wakeNs)/1e6)
	toClient.Close()
	client.Wait()
	srv.stop()
	r.Report("bytes/conn", float64(delta)/float64(n))
	r.Report("peak_rss_MiB", harness.MiB(harness.PeakRSSBytes()))
}

// splitmix64: the same sequence as the C++ side's.
func splitmix64(x *uint64) uint64 {
	*x += 0x9e3779b97f4a7c15
	z := *x
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func timers(r *harness.Result) {
	n := harness.Scaled(sleepers)
	ms := make([]int, n)
	seed := uint64(1)
	longest := 0
	for i := range ms {
		ms[i] = 1 + int(splitmix64(&seed)%maxSleepMs)
		if ms[i] > longest {
			longest = ms[i]
		}
	}
	var wg sync.WaitGroup
	start := time.Now()
	for _, m := range ms {
		wg.Add(1)
		go func(m int) {
			time.Sleep(time.Duration(m) * time.Millisecond)
			wg.Done()
		}(m)
	}
	wg.Wait()
	d := time.Since(start)
	r.Report("ns/timer", float64(d.Nanoseconds())/float64(n))
	r.Report("late_ms", float64(d.Nanoseconds())/1e6-float64(longest))
}

func timerOpsCase(r *harness.Result) {
	n := harness.Scaled(timerOps)
	stopped := 0
	start := time.Now()
	for i := 0; i < n; i++ {
		t := time.NewTimer(time.Hour)
		if t.Stop() {
			stopped++
		}
	}
	d := time.Since(start)
	if stopped != n {
		fail("timer_ops: Stop returned false for an armed timer")
	}
	r.Report("ns/timer_op", float64(d.Nanoseconds())/float64(n))
}

func timerRearm(r *harness.Result) {
	n := harness.Scaled(rearmTimers)
	procs := runtime.GOMAXPROCS(0)
	timers := make([]*time.Timer, n)
	start := make(chan struct{})
	var made, done sync.WaitGroup
	var rearmed atomic.Int64
	// One goroutine per P, each owning a slice of the timers and making
	// them itself, as a server's connection goroutines arm their own
	// deadlines (the timers land in the heap of the P that made them).
	for w := 0; w < procs; w++ {
		lo, hi := n*w/procs, n*(w+1)/procs
		made.Add(1)
		done.Add(1)
		go func() {
			for i := lo; i < hi; i++ {
				timers[i] = time.NewTimer(readDeadline)
			}
			made.Done()
			<-start // closed: every goroutine's timers are armed
			active := int64(0)
			for round := 0; round < rearmRounds; round++ {
				for i := lo; i < hi; i++ {
					if timers[i].Reset(readDeadline) {
						active++
					}
				}
			}
			rearmed.Add(active)
			done.Done()
		}()
	}
	made.Wait()
	t0 := time.Now()
	close(start)
	done.Wait()
	d := time.Since(t0)
	stopped := 0
	for _, t := range timers {
		if t.Stop() {
			stopped++
		}
	}
	if rearmed.Load() != int64(n*rearmRounds) {
		fail("timer_rearm: Reset returned false for an armed timer")
	}
	if stopped != n {
		fail("timer_rearm: Stop returned false for an armed timer")
	}
	r.Report("ns/rearm", float64(d.Nanoseconds())/float64(n*rearmRounds))
}

func deadlineRearm(r *harness.Result) {
	n := harness.Scaled(deadlineFiles)
	// Both ends of every pipe stay open: a read end whose writer is gone
	// would be readable (end of file), unlike an idle connection.
	need := uint64(2*n + 64)
	if have := raiseNofile(); have < need {
		fail("deadline_rearm: needs %d descriptors, RLIMIT_NOFILE allows %d", need, have)
	}
	type pipe struct{ r, w *os.File }
	pipes := make([]pipe, 0, n)
	for i := 0; i < n; i++ {
		pr, pw, err := os.Pipe()
		if err != nil {
			fail("deadline_rearm: pipe: %v", err)
		}
		pipes = append(pipes, pipe{pr, pw})
	}
	// pushAll pushes every read end's deadline to now + 30 s.
	pushAll := func() {
		for _, p := range pipes {
			if err := p.r.SetReadDeadline(time.Now().Add(readDeadline)); err != nil {
				fail("deadline_rearm: SetReadDeadline: %v", err)
			}
		}
	}
	// The first call arms each descriptor's deadline timer; the rounds timed
	// below only push armed deadlines later, as timer_rearm's resets do.
	pushAll()
	start := time.Now()
	for round := 0; round < deadlineRounds; round++ {
		pushAll()
	}
	d := time.Since(start)
	for _, p := range pipes {
		p.r.Close()
		p.w.Close()
	}
	r.Report("ns/rearm", float64(d.Nanoseconds())/float64(n*deadlineRounds))
}

func main() {
	if spec := os.Getenv(idleClientEnv); spec != "" {
		idleClient(spec)
	}
	harness.Main([]harness.Case{
		{Workload: "tcp_echo", Procs: 1, Run: tcpEcho},
		{Workload: "tcp_echo", Procs: 2, Run: tcpEcho},
		{Workload: "idle_conns", Procs: 1, Run: idle},
		// gort's stackless sessions; Go serves them as idle_conns does.
		{Workload: "idle_sessions", Procs: 1, Run: idle},
		{Workload: "timers", Procs: 2, Run: timers},
		{Workload: "timer_ops", Procs: 1, Run: timerOpsCase},
		{Workload: "timer_rearm", Procs: 1, Run: timerRearm},
		{Workload: "timer_rearm", Procs: 2, Run: timerRearm},
		{Workload: "deadline_rearm", Procs: 1, Run: deadlineRearm},
	})
}
