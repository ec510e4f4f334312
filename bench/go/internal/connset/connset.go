// Package connset is what the Go twins of gort's sample servers
// (bench/go/http_server, bench/go/echo_server) share, as the samples share
// the shape of their ConnSet classes: a bound on open connections, the set
// of open connections that a shutdown closes, the accept loop that serves
// each connection in a goroutine of its own, and the graceful shutdown.
package connset

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// Start is the twins' common start: GOMAXPROCS (procs > 0), the listener
// (on failure: "prog: error" and exit 1), SIGINT and SIGTERM delivered on
// the returned channel (set up before the port is announced, as the gort
// samples do), then "listening on HOST:PORT" on stdout, the line the
// benchmark scripts and the integration tests wait for.
func Start(prog, addr string, procs int) (net.Listener, chan os.Signal) {
	if procs > 0 {
		runtime.GOMAXPROCS(procs)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", prog, err)
		os.Exit(1)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	fmt.Printf("listening on %s\n", ln.Addr())
	return ln, sig
}

// Set holds a server's open connections. The zero value is not usable;
// call New.
type Set struct {
	slots   chan struct{} // one token per open connection: the limit
	mu      sync.Mutex
	closing bool
	conns   map[net.Conn]struct{}
	wg      sync.WaitGroup
}

// New returns a Set that lets at most maxConns connections be open at once.
func New(maxConns int) *Set {
	return &Set{slots: make(chan struct{}, maxConns), conns: map[net.Conn]struct{}{}}
}

func (s *Set) add(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	return true
}

func (s *Set) remove(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.wg.Done()
}

// AcceptLoop accepts connections on ln until Accept fails (as it does once
// ln is closed) and returns that error. Each connection is served by serve
// in its own goroutine, and closed after it returns; while the limit is
// reached, the loop waits for a connection to finish before it accepts.
func (s *Set) AcceptLoop(ln net.Listener, serve func(net.Conn)) error {
	for {
		s.slots <- struct{}{}
		c, err := ln.Accept()
		if err != nil {
			<-s.slots
			return err
		}
		go func() {
			if s.add(c) {
				serve(c)
				s.remove(c)
			}
			c.Close()
			<-s.slots
		}()
	}
}

// CloseAll closes every open connection, which wakes their blocked reads,
// and makes the set refuse new ones; it returns how many it closed.
func (s *Set) CloseAll() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closing = true
	for c := range s.conns {
		c.Close()
	}
	return len(s.conns)
}

// Wait waits until every connection's serve has returned, at most limit;
// it reports whether they all did.
func (s *Set) Wait(limit time.Duration) bool {
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(limit):
		return false
	}
}

// Shutdown is what Serve did when it returned.
type Shutdown struct {
	Stopped   bool  // a signal arrived (else Accept failed)
	AcceptErr error // Accept's error if it failed
	Open      int   // connections open when the shutdown began
	Drained   bool  // all of them finished within the drain limit
}

// Serve runs AcceptLoop until a value arrives on sig (the caller's
// signal.Notify channel) or Accept fails; then it closes ln and every open
// connection and waits for their serve calls, at most drain.
func (s *Set) Serve(ln net.Listener, sig <-chan os.Signal, serve func(net.Conn),
	drain time.Duration) Shutdown {
	acceptDone := make(chan error, 1)
	go func() { acceptDone <- s.AcceptLoop(ln, serve) }()
	var r Shutdown
	select {
	case <-sig:
		r.Stopped = true
	case r.AcceptErr = <-acceptDone:
	}
	ln.Close()
	r.Open = s.CloseAll()
	if r.Stopped {
		<-acceptDone
	}
	r.Drained = s.Wait(drain)
	return r
}
