// tls_bench is the Go twin of bench/tls_bench.cpp: a crypto/tls echo server
// and verifying clients on 127.0.0.1, in one process: handshakes for a fixed
// time (dial, then close at once), then 100 clients echoing 64-byte
// messages. The workload, its parameters and its metrics (handshakes/s,
// cpu_us/handshake, msgs/s, cpu_us/msg; CPU time from getrusage
// RUSAGE_SELF, client and server together) are the C++ program's (see the
// comment at its top); the certificates are made the same way (a P-256 CA
// and a server certificate for localhost and 127.0.0.1 signed by it).
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"gortbench/internal/harness"
)

const (
	roundTrips = 50_000
	clients    = 100
	message    = 64
	// The handshake phase's length, scaled by GORT_BENCH_SCALE.
	handshakeSeconds = 2.0
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(3)
}

// pki returns the server's certificate and a pool holding its CA.
func pki() (tls.Certificate, *x509.CertPool) {
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "gort test CA"},
		NotBefore:             now.Add(-24 * time.Hour),
		NotAfter:              now.Add(30 * 24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		fail("ca: %v", err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "localhost"},
		NotBefore:    now.Add(-24 * time.Hour),
		NotAfter:     now.Add(30 * 24 * time.Hour),
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		fail("server: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}

func tlsEcho(r *harness.Result) {
	perClient := harness.Scaled(roundTrips) / clients
	if perClient < 1 {
		perClient = 1
	}
	cert, pool := pki()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		fail("listen: %v", err)
	}
	var served sync.WaitGroup
	served.Add(1)
	go func() {
		defer served.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			served.Add(1)
			go func(c net.Conn) {
				defer served.Done()
				defer c.Close()
				buf := make([]byte, 4096)
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
			}(c)
		}
	}()
	ccfg := &tls.Config{RootCAs: pool, ServerName: "localhost"}
	// Handshakes for a fixed time: dial, then close at once (the server's
	// side of the last few may finish just after).
	handshakeTime := time.Duration(handshakeSeconds * harness.Scale() * float64(time.Second))
	handshakes := 0
	cpu0 := harness.CPUSeconds()
	dialStart := time.Now()
	var dialTime time.Duration
	for {
		c, err := tls.Dial("tcp", ln.Addr().String(), ccfg)
		if err != nil {
			fail("dial: %v", err)
		}
		handshakes++
		c.Close()
		if dialTime = time.Since(dialStart); dialTime >= handshakeTime {
			break
		}
	}
	dialCPU := harness.CPUSeconds() - cpu0
	// Resumed handshakes for a fixed time: a client with a session cache
	// dials, echoes one byte (which also takes the server's ticket), closes.
	rcfg := &tls.Config{RootCAs: pool, ServerName: "localhost", ClientSessionCache: tls.NewLRUClientSessionCache(0)}
	resumed, resumeDials := 0, 0
	one := []byte{'x'}
	cpu0 = harness.CPUSeconds()
	resumeStart := time.Now()
	for time.Since(resumeStart) < handshakeTime/2 {
		c, err := tls.Dial("tcp", ln.Addr().String(), rcfg)
		if err != nil {
			fail("dial: %v", err)
		}
		if _, err := c.Write(one); err != nil {
			fail("write: %v", err)
		}
		if _, err := io.ReadFull(c, one); err != nil {
			fail("read: %v", err)
		}
		if c.ConnectionState().DidResume {
			resumed++
		}
		resumeDials++
		c.Close()
	}
	resumeCPU := harness.CPUSeconds() - cpu0
	if resumed < resumeDials*9/10 {
		fail("only %d of %d handshakes resumed", resumed, resumeDials)
	}
	// The clients of the message phase (not timed).
	conns := make([]*tls.Conn, 0, clients)
	for i := 0; i < clients; i++ {
		c, err := tls.Dial("tcp", ln.Addr().String(), ccfg)
		if err != nil {
			fail("dial: %v", err)
		}
		conns = append(conns, c)
	}
	var failed atomic.Bool
	var wg sync.WaitGroup
	cpu0 = harness.CPUSeconds()
	start := time.Now()
	for _, c := range conns {
		wg.Add(1)
		go func(c *tls.Conn) {
			defer wg.Done()
			msg := make([]byte, message)
			for i := range msg {
				msg[i] = 'x'
			}
			back := make([]byte, message)
			for i := 0; i < perClient && !failed.Load(); i++ {
				if _, err := c.Write(msg); err != nil {
					failed.Store(true)
					return
				}
				if _, err := io.ReadFull(c, back); err != nil {
					failed.Store(true)
					return
				}
			}
		}(c)
	}
	wg.Wait()
	elapsed := time.Since(start)
	msgCPU := harness.CPUSeconds() - cpu0
	if failed.Load() {
		fail("an echo round trip failed")
	}
	for _, c := range conns {
		c.Close()
	}
	ln.Close()
	served.Wait()
	msgs := float64(perClient * clients)
	r.Report("msgs/s", msgs/elapsed.Seconds())
	r.Report("cpu_us/msg", msgCPU*1e6/msgs)
	r.Report("handshakes/s", float64(handshakes)/dialTime.Seconds())
	r.Report("cpu_us/handshake", dialCPU*1e6/float64(handshakes))
	r.Report("cpu_us/resumed", resumeCPU*1e6/float64(resumeDials))
}

// tlsHandshakeFloor: crypto/tls handshakes over net.Pipe (no sockets),
// the client and the server each in a goroutine, for 1 s (scaled).
func tlsHandshakeFloor(r *harness.Result) {
	cert, pool := pki()
	scfg := &tls.Config{Certificates: []tls.Certificate{cert}}
	ccfg := &tls.Config{RootCAs: pool, ServerName: "localhost"}
	limit := time.Duration(harness.Scale() * float64(time.Second))
	handshakes := 0
	cpu0 := harness.CPUSeconds()
	start := time.Now()
	for time.Since(start) < limit {
		a, b := net.Pipe()
		done := make(chan error, 1)
		go func() { done <- tls.Server(b, scfg).Handshake() }()
		if err := tls.Client(a, ccfg).Handshake(); err != nil {
			fail("client handshake: %v", err)
		}
		if err := <-done; err != nil {
			fail("server handshake: %v", err)
		}
		a.Close()
		b.Close()
		handshakes++
	}
	cpu := harness.CPUSeconds() - cpu0
	r.Report("cpu_us/handshake", cpu*1e6/float64(handshakes))
}

func main() {
	harness.Main([]harness.Case{
		{Workload: "tls_echo", Procs: 1, Run: tlsEcho},
		{Workload: "tls_echo", Procs: 2, Run: tlsEcho},
		{Workload: "tls_handshake_floor", Procs: 1, Run: tlsHandshakeFloor},
	})
}
