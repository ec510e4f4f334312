// echo_server is the Go twin of samples/echo_server (gort), for
// bench/echo_compare: a TCP echo server with one goroutine per connection,
// the same flags, limits and shutdown, written on the net package.
//
// The read buffer is 4 KiB, as in the gort sample and in
// bench/go/net_bench's tcp_echo (Go's usual size). Differences: the
// connection limit is a buffered channel used as a semaphore (Go's
// netutil.LimitListener does the same; internal/connset, shared with
// bench/go/http_server); the idle timeout is a read
// deadline set before every read, as the gort sample renews its own.
//
// Usage: echo_server [-listen 127.0.0.1:7000] [-procs N] [-max-conns 10000]
//
//	[-idle-timeout SECONDS]
//
// Prints "listening on HOST:PORT" once it accepts connections, so a port
// of 0 can be used and read back.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"time"

	"gortbench/internal/connset"
)

const readBuffer = 4096

// handle echoes everything it reads until end of stream, an error or the
// idle timeout.
func handle(c net.Conn, idle time.Duration) {
	buf := make([]byte, readBuffer)
	for {
		if idle > 0 {
			c.SetReadDeadline(time.Now().Add(idle))
		}
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

func main() {
	listen := flag.String("listen", "127.0.0.1:7000", "address to listen on")
	procs := flag.Int("procs", 0, "GOMAXPROCS (0: the default)")
	maxConns := flag.Int("max-conns", 10000, "at most this many connections")
	idleTimeout := flag.Int("idle-timeout", 300, "close a connection idle for this many seconds (0: never)")
	flag.Parse()
	if *maxConns < 1 || *idleTimeout < 0 || flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	ln, sig := connset.Start("echo_server", *listen, *procs)
	idle := time.Duration(*idleTimeout) * time.Second
	r := connset.New(*maxConns).Serve(ln, sig, func(c net.Conn) { handle(c, idle) }, 5*time.Second)
	signal.Stop(sig)
	if r.Stopped {
		note := ""
		if !r.Drained {
			note = ", some did not finish in time"
		}
		fmt.Fprintf(os.Stderr, "echo_server: shutting down (%d connection(s) closed%s)\n", r.Open, note)
		return
	}
	fmt.Fprintf(os.Stderr, "echo_server: accept: %v\n", r.AcceptErr)
	os.Exit(1)
}
