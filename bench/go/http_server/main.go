// http_server is the Go twin of samples/http_server (gort), for
// bench/http_compare: the same minimal HTTP/1.1 server with keep-alive and
// pipelining, one goroutine per connection, written on the raw net package
// (not net/http), with the same request parsing, limits, routes, responses
// and flags, line for line where Go allows. Read the C++ file for the why of
// each rule; this one only says where Go differs.
//
// Differences: the Server header says "go" rather than "gort"; /json reports
// runtime.NumGoroutine and GOMAXPROCS; the connection limit is a buffered
// channel used as a semaphore (internal/connset, shared with
// bench/go/echo_server); shutdown is signal.Notify rather than a polled
// flag.
//
// Usage: http_server [-listen 127.0.0.1:8080] [-procs N] [-max-conns 10000]
//
//	[-idle-timeout 30]
//
// Prints "listening on HOST:PORT".
package main

import (
	"bytes"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"time"

	"gortbench/internal/connset"
)

const (
	maxRequestLine  = 8 * 1024
	maxHeaderBytes  = 16 * 1024
	maxHeaderFields = 100
	maxBodyBytes    = 1024 * 1024
	readChunk       = 16 * 1024
	flushAt         = 64 * 1024
	maxSleepMs      = 10000
	writeTimeout    = 30 * time.Second
)

// ---- byte-string helpers -------------------------------------------------

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isAlnum(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}
func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c - 'A' + 'a'
	}
	return c
}
func iequals(a []byte, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lower(a[i]) != lower(b[i]) {
			return false
		}
	}
	return true
}
func istartsWith(s []byte, prefix string) bool {
	return len(s) >= len(prefix) && iequals(s[:len(prefix)], prefix)
}
func trim(s []byte) []byte {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// parseUint parses a decimal number of at most maxDigits digits.
func parseUint(s []byte, maxDigits int) (uint64, bool) {
	if len(s) == 0 || len(s) > maxDigits {
		return 0, false
	}
	var v uint64
	for _, c := range s {
		if !isDigit(c) {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	return v, true
}

// ---- parsing -------------------------------------------------------------

type header struct{ name, value []byte }

type request struct {
	method, target, path, query []byte
	minor                       int
	headers                     []header
	body                        []byte
	keepAlive                   bool
	expectContinue              bool
}

func (r *request) header(name string) []byte {
	for _, h := range r.headers {
		if iequals(h.name, name) {
			return h.value
		}
	}
	return nil
}

type parseResult int

const (
	incomplete parseResult = iota
	complete
	parseFailed
)

type parseError struct {
	status int
	detail string
}

func isTchar(c byte) bool {
	if isAlnum(c) {
		return true
	}
	return c != 0 && bytes.IndexByte([]byte("!#$%&'*+-.^_`|~"), c) >= 0
}
func isToken(s []byte) bool {
	if len(s) == 0 {
		return false
	}
	for _, c := range s {
		if !isTchar(c) {
			return false
		}
	}
	return true
}
func hasCtl(s []byte) bool {
	for _, c := range s {
		if (c < 0x20 && c != '\t') || c == 0x7f {
			return true
		}
	}
	return false
}

// listHas reports whether the comma-separated list v contains token.
func listHas(v []byte, token string) bool {
	for {
		i := bytes.IndexByte(v, ',')
		part := v
		if i >= 0 {
			part = v[:i]
		}
		if iequals(trim(part), token) {
			return true
		}
		if i < 0 {
			return false
		}
		v = v[i+1:]
	}
}

// parseRequest parses one request from buf (which may hold less or more than
// one). On complete, consumed is its length and req's slices point into buf.
func parseRequest(buf []byte, req *request) (res parseResult, consumed int, perr parseError) {
	req.expectContinue = false
	pos := 0
	for pos < len(buf) && (buf[pos] == '\r' || buf[pos] == '\n') {
		pos++
	}
	start := pos

	nextLine := func() ([]byte, bool) {
		nl := bytes.IndexByte(buf[pos:], '\n')
		if nl < 0 {
			return nil, false
		}
		line := buf[pos : pos+nl]
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		pos += nl + 1
		return line, true
	}
	tooBig := func(at int) bool { return at-start > maxHeaderBytes }

	line, ok := nextLine()
	if (ok && len(line) > maxRequestLine) || (!ok && len(buf)-start > maxRequestLine) {
		return parseFailed, 0, parseError{414, "request line too long"}
	}
	if !ok {
		return incomplete, 0, parseError{}
	}
	sp1 := bytes.IndexByte(line, ' ')
	sp2 := -1
	if sp1 >= 0 {
		if j := bytes.IndexByte(line[sp1+1:], ' '); j >= 0 {
			sp2 = sp1 + 1 + j
		}
	}
	if sp2 < 0 || bytes.IndexByte(line[sp2+1:], ' ') >= 0 {
		return parseFailed, 0, parseError{400, "malformed request line"}
	}
	req.method = line[:sp1]
	req.target = line[sp1+1 : sp2]
	version := line[sp2+1:]
	if !isToken(req.method) {
		return parseFailed, 0, parseError{400, "invalid method"}
	}
	if len(req.target) == 0 || hasCtl(req.target) {
		return parseFailed, 0, parseError{400, "invalid request target"}
	}
	switch {
	case string(version) == "HTTP/1.1":
		req.minor = 1
	case string(version) == "HTTP/1.0":
		req.minor = 0
	case len(version) == 8 && string(version[:5]) == "HTTP/" && isDigit(version[5]) &&
		version[6] == '.' && isDigit(version[7]):
		return parseFailed, 0, parseError{505, "unsupported protocol version"}
	default:
		return parseFailed, 0, parseError{400, "malformed HTTP version"}
	}

	req.headers = req.headers[:0]
	for {
		h, ok := nextLine()
		if !ok {
			if tooBig(len(buf)) {
				return parseFailed, 0, parseError{431, "headers too large"}
			}
			return incomplete, 0, parseError{}
		}
		if tooBig(pos) {
			return parseFailed, 0, parseError{431, "headers too large"}
		}
		if len(h) == 0 {
			break
		}
		if len(req.headers) == maxHeaderFields {
			return parseFailed, 0, parseError{431, "too many header fields"}
		}
		colon := bytes.IndexByte(h, ':')
		if colon < 0 || !isToken(h[:colon]) {
			return parseFailed, 0, parseError{400, "malformed header field"}
		}
		value := trim(h[colon+1:])
		if hasCtl(value) {
			return parseFailed, 0, parseError{400, "invalid header value"}
		}
		req.headers = append(req.headers, header{h[:colon], value})
	}

	if req.minor == 1 && len(req.header("Host")) == 0 {
		present := false
		for _, kv := range req.headers {
			present = present || iequals(kv.name, "Host")
		}
		if !present {
			return parseFailed, 0, parseError{400, "missing required Host header"}
		}
	}
	if len(req.header("Transfer-Encoding")) != 0 {
		return parseFailed, 0, parseError{501, "unsupported transfer encoding"}
	}
	var length uint64
	haveLength := false
	for _, kv := range req.headers {
		if !iequals(kv.name, "Content-Length") {
			continue
		}
		n, ok := parseUint(kv.value, 18)
		if !ok || (haveLength && length != n) {
			return parseFailed, 0, parseError{400, "bad Content-Length"}
		}
		length, haveLength = n, true
	}
	if haveLength && length > maxBodyBytes {
		return parseFailed, 0, parseError{413, "request body too large"}
	}

	conn := req.header("Connection")
	if req.minor == 1 {
		req.keepAlive = !listHas(conn, "close")
	} else {
		req.keepAlive = listHas(conn, "keep-alive")
	}

	bodyLen := int(length)
	if len(buf)-pos < bodyLen {
		req.expectContinue = req.minor == 1 && iequals(req.header("Expect"), "100-continue")
		return incomplete, 0, parseError{}
	}
	req.body = buf[pos : pos+bodyLen]
	consumed = pos + bodyLen

	t := req.target
	if istartsWith(t, "http://") || istartsWith(t, "https://") {
		from := bytes.Index(t, []byte("//")) + 2
		if slash := bytes.IndexByte(t[from:], '/'); slash < 0 {
			t = []byte("/")
		} else {
			t = t[from+slash:]
		}
	} else if string(t) != "*" && t[0] != '/' {
		return parseFailed, 0, parseError{400, "invalid request target"}
	}
	if q := bytes.IndexByte(t, '?'); q >= 0 {
		req.path, req.query = t[:q], t[q+1:]
	} else {
		req.path, req.query = t, nil
	}
	return complete, consumed, parseError{}
}

// ---- responses -----------------------------------------------------------

func statusText(code int) string {
	switch code {
	case 100:
		return "Continue"
	case 200:
		return "OK"
	case 204:
		return "No Content"
	case 400:
		return "Bad Request"
	case 404:
		return "Not Found"
	case 405:
		return "Method Not Allowed"
	case 413:
		return "Request Entity Too Large"
	case 414:
		return "Request URI Too Long"
	case 417:
		return "Expectation Failed"
	case 431:
		return "Request Header Fields Too Large"
	case 501:
		return "Not Implemented"
	case 505:
		return "HTTP Version Not Supported"
	}
	return "Unknown"
}

// dateCache formats the Date header at most once a second per connection.
// now is the batch's clock reading (serveConn).
type dateCache struct {
	last  int64
	value []byte
}

func (d *dateCache) get(now time.Time) []byte {
	if s := now.Unix(); s != d.last {
		d.last = s
		d.value = now.UTC().AppendFormat(d.value[:0], "Mon, 02 Jan 2006 15:04:05 GMT")
	}
	return d.value
}

type response struct {
	status      int
	contentType string
	body        []byte
	allow       string
}

func appendResponse(out []byte, r *response, head, keepAlive, http10 bool, date *dateCache, now time.Time) []byte {
	out = append(out, "HTTP/1.1 "...)
	out = strconv.AppendInt(out, int64(r.status), 10)
	out = append(out, ' ')
	out = append(out, statusText(r.status)...)
	out = append(out, "\r\n"...)
	if r.status != 204 {
		out = append(out, "Content-Type: "...)
		out = append(out, r.contentType...)
		out = append(out, "\r\nContent-Length: "...)
		out = strconv.AppendInt(out, int64(len(r.body)), 10)
		out = append(out, "\r\n"...)
	}
	if r.allow != "" {
		out = append(out, "Allow: "...)
		out = append(out, r.allow...)
		out = append(out, "\r\n"...)
	}
	out = append(out, "Date: "...)
	out = append(out, date.get(now)...)
	out = append(out, "\r\nServer: go\r\n"...)
	if !keepAlive {
		out = append(out, "Connection: close\r\n"...)
	} else if http10 {
		out = append(out, "Connection: keep-alive\r\n"...)
	}
	out = append(out, "\r\n"...)
	if !head && r.status != 204 {
		out = append(out, r.body...)
	}
	return out
}

func text(status int, body string) response {
	return response{status: status, contentType: "text/plain; charset=utf-8", body: []byte(body)}
}

func knownMethod(m []byte) bool {
	switch string(m) {
	case "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH":
		return true
	}
	return false
}

// queryParam returns a query parameter's value ("" if it has none).
func queryParam(query []byte, name string) ([]byte, bool) {
	for {
		i := bytes.IndexByte(query, '&')
		kv := query
		if i >= 0 {
			kv = query[:i]
		}
		eq := bytes.IndexByte(kv, '=')
		if eq < 0 {
			if string(kv) == name {
				return nil, true
			}
		} else if string(kv[:eq]) == name {
			return kv[eq+1:], true
		}
		if i < 0 {
			return nil, false
		}
		query = query[i+1:]
	}
}

// allow answers OPTIONS, and 405 for a method not in methods; ok means the
// route handles the request itself.
func allow(req *request, methods string) (response, bool) {
	if string(req.method) == "OPTIONS" {
		return response{status: 204, allow: methods}, false
	}
	rest := methods
	for {
		i := bytes.IndexByte([]byte(rest), ',')
		m := rest
		if i >= 0 {
			m = rest[:i]
		}
		if string(req.method) == string(trim([]byte(m))) {
			return response{}, true
		}
		if i < 0 {
			break
		}
		rest = rest[i+1:]
	}
	r := text(405, "405 method not allowed\n")
	r.allow = methods
	return r, false
}

func route(req *request) response {
	if !knownMethod(req.method) {
		return text(501, "501 method not implemented\n")
	}
	switch string(req.path) {
	case "/":
		if r, ok := allow(req, "GET, HEAD"); !ok {
			return r
		}
		return text(200, "Hello, World!\n")
	case "/json":
		if r, ok := allow(req, "GET, HEAD"); !ok {
			return r
		}
		body := fmt.Sprintf(`{"message":"Hello, World!","server":"go","goroutines":%d,"procs":%d}`+"\n",
			runtime.NumGoroutine(), runtime.GOMAXPROCS(0))
		return response{status: 200, contentType: "application/json", body: []byte(body)}
	case "/echo":
		if r, ok := allow(req, "POST, PUT"); !ok {
			return r
		}
		ct := string(req.header("Content-Type"))
		if ct == "" {
			ct = "application/octet-stream"
		}
		return response{status: 200, contentType: ct, body: append([]byte(nil), req.body...)}
	case "/sleep":
		if r, ok := allow(req, "GET, HEAD"); !ok {
			return r
		}
		v, ok := queryParam(req.query, "ms")
		ms, okNum := parseUint(v, 5)
		if !ok || !okNum || ms > maxSleepMs {
			return text(400, fmt.Sprintf("400 want /sleep?ms=N with 0 <= N <= %d\n", maxSleepMs))
		}
		time.Sleep(time.Duration(ms) * time.Millisecond)
		return text(200, fmt.Sprintf("slept %d ms\n", ms))
	}
	return text(404, "404 page not found\n")
}

// ---- connections -----------------------------------------------------------

// lingerClose sends FIN, then reads and discards briefly (Go's
// closeWriteAndWait).
func lingerClose(c *net.TCPConn) {
	c.CloseWrite()
	c.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	sink := make([]byte, 4096)
	for total := 0; total < 256*1024; {
		n, err := c.Read(sink)
		if err != nil || n == 0 {
			break
		}
		total += n
	}
}

func flush(c *net.TCPConn, out *[]byte, now time.Time) bool {
	if len(*out) == 0 {
		return true
	}
	c.SetWriteDeadline(now.Add(writeTimeout))
	_, err := c.Write(*out)
	*out = (*out)[:0]
	return err == nil
}

func serveConn(c *net.TCPConn, idle time.Duration) {
	var in, out []byte
	var date dateCache
	date.last = -1
	chunk := make([]byte, readChunk)
	sentContinue := false
	var req request
	if idle > 0 {
		c.SetReadDeadline(time.Now().Add(idle))
	}
	for {
		// One clock reading serves the batch: its Date headers and its
		// write deadline (as in the gort sample).
		now := time.Now()
		pos := 0
		closeAfter, graceful := false, false
		for {
			res, used, perr := parseRequest(in[pos:], &req)
			if res == incomplete {
				if req.expectContinue && !sentContinue {
					out = append(out, "HTTP/1.1 100 Continue\r\n\r\n"...)
					sentContinue = true
				}
				break
			}
			if res == parseFailed {
				r := text(perr.status, fmt.Sprintf("%d %s: %s\n", perr.status, statusText(perr.status), perr.detail))
				out = appendResponse(out, &r, false, false, false, &date, now)
				closeAfter, graceful = true, true
				break
			}
			r := route(&req)
			out = appendResponse(out, &r, string(req.method) == "HEAD", req.keepAlive, req.minor == 0, &date, now)
			pos += used
			sentContinue = false
			if !req.keepAlive {
				closeAfter = true
				break
			}
			if len(out) >= flushAt && !flush(c, &out, time.Now()) {
				return
			}
		}
		wrote := len(out) != 0
		if !flush(c, &out, now) {
			return
		}
		if closeAfter {
			if graceful {
				lingerClose(c)
			} else {
				c.CloseWrite()
			}
			return
		}
		in = append(in[:0], in[pos:]...)
		if wrote && idle > 0 {
			c.SetReadDeadline(time.Now().Add(idle))
		}
		n, err := c.Read(chunk)
		if err != nil || n == 0 {
			return
		}
		in = append(in, chunk[:n]...)
	}
}

// ---- the server: accept loop, limits, shutdown ---------------------------

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "address to listen on")
	procs := flag.Int("procs", 0, "GOMAXPROCS (0: the default)")
	maxConns := flag.Int("max-conns", 10000, "at most this many connections")
	idleTimeout := flag.Int("idle-timeout", 30, "close an idle keep-alive connection after this many seconds")
	flag.Parse()
	if *maxConns < 1 {
		flag.Usage()
		os.Exit(2)
	}
	ln, sig := connset.Start("http_server", *listen, *procs)
	idle := time.Duration(*idleTimeout) * time.Second
	r := connset.New(*maxConns).Serve(ln, sig, func(c net.Conn) {
		serveConn(c.(*net.TCPConn), idle)
	}, 5*time.Second)
	if r.Stopped {
		fmt.Fprintln(os.Stderr, "http_server: shutting down")
		return
	}
	fmt.Fprintf(os.Stderr, "http_server: accept: %v\n", r.AcceptErr)
	os.Exit(1)
}
