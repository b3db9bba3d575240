package testenv

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestProxy runs a real HTTP server behind the proxy through Pass,
// Blackhole, Pass, Refuse and Pass, with one client whose pooled
// connections live through the switches, as a long-running client's would.
func TestProxy(t *testing.T) {
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		_, _ = io.WriteString(w, "pong")
	}))
	t.Cleanup(srv.Close)
	p := StartProxy(t, srv.Listener.Addr().String())
	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	client := &http.Client{Transport: transport, Timeout: 300 * time.Millisecond}
	url := "http://" + p.Addr + "/ping"

	get := func(phase string) {
		t.Helper()
		resp, err := client.Get(url)
		if err != nil {
			t.Fatalf("%s: GET through the proxy: %v", phase, err)
		}
		defer resp.Body.Close()
		if b, _ := io.ReadAll(resp.Body); string(b) != "pong" {
			t.Fatalf("%s: GET answered %q, want pong", phase, b)
		}
	}
	timesOut := func(phase string) {
		t.Helper()
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
		}
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("%s: GET returned %v, want a timeout", phase, err)
		}
	}

	get("pass")

	if err := p.Blackhole(); err != nil {
		t.Fatal(err)
	}
	timesOut("blackhole, pooled connection")
	transport.CloseIdleConnections()
	timesOut("blackhole, new connection")
	// A raw connection is accepted, then never answered.
	conn, err := net.DialTimeout("tcp", p.Addr, time.Second)
	if err != nil {
		t.Fatalf("blackhole: dial: %v, want the connection accepted", err)
	}
	if _, err := io.WriteString(conn, "GET /ping HTTP/1.0\r\n\r\n"); err != nil {
		t.Fatalf("blackhole: write: %v", err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if n, err := conn.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("blackhole: read %d bytes, %v; want a timeout", n, err)
	}
	conn.Close()

	if err := p.Pass(); err != nil {
		t.Fatal(err)
	}
	get("pass after blackhole")

	p.Refuse()
	if conn, err := net.DialTimeout("tcp", p.Addr, time.Second); !errors.Is(err, syscall.ECONNREFUSED) {
		if conn != nil {
			conn.Close()
		}
		t.Fatalf("refuse: dial returned %v, want connection refused", err)
	}
	if resp, err := client.Get(url); err == nil || !strings.Contains(err.Error(), "refused") {
		if err == nil {
			resp.Body.Close()
		}
		t.Errorf("refuse: GET returned %v, want connection refused", err)
	}

	if err := p.Pass(); err != nil {
		t.Fatal(err)
	}
	get("pass after refuse")

	if n := served.Load(); n != 3 {
		t.Errorf("the server answered %d requests, want 3: only those sent while passing reach it", n)
	}
}
