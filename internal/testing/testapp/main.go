package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: testapp pause | serve [addr] | client url [addr] | overlay")
		os.Exit(2)
	}
	arg := func(i int, def string) string {
		if len(os.Args) > i {
			return os.Args[i]
		}
		return def
	}
	var err error
	switch os.Args[1] {
	case "pause":
		pause()
	case "serve":
		err = serve(arg(2, ":8080"))
	case "client":
		if len(os.Args) < 3 {
			fmt.Fprintln(os.Stderr, "usage: testapp client url [addr]")
			os.Exit(2)
		}
		err = client(os.Args[2], arg(3, ":8081"))
	case "overlay":
		err = overlay()
	default:
		fmt.Fprintf(os.Stderr, "testapp: unknown role %q (pause, serve, client, overlay)\n", os.Args[1])
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testapp:", err)
		os.Exit(1)
	}
}

// pause waits for SIGTERM or SIGINT and reaps whatever children it
// inherits, as a pod sandbox's first process must.
func pause() {
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sig {
		if s != syscall.SIGCHLD {
			return
		}
		for {
			var ws syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}

// stopDelay is how long serve goes on answering after SIGTERM, not ready
// any more, as a well-behaved server does: the kube-proxies of every node
// take a moment to stop sending it new connections.
const stopDelay = 3 * time.Second

func serve(addr string) error {
	host, _ := os.Hostname()
	var stopping atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) {
		if stopping.Load() {
			http.Error(w, "stopping", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		ip, _, _ := net.SplitHostPort(r.RemoteAddr)
		fmt.Fprintf(w, "%s %s\n", host, ip)
	})
	return listenUntilTerm(addr, mux, func() {
		stopping.Store(true)
		time.Sleep(stopDelay)
	})
}

// Counts are what client serves: every call is counted once, as ok or
// failed.
type Counts struct {
	Calls, OK, Failed int
	// LongestOutage is the longest run of consecutive failed calls, as
	// time from the first failure of the run to the next success (or to
	// now).
	LongestOutage time.Duration
	// Answers counts the answers by their text ("<server> <caller>").
	Answers map[string]int
	// LastError is the error of the last failed call.
	LastError string `json:",omitempty"`
}

func client(url, addr string) error {
	var mu sync.Mutex
	c := Counts{Answers: map[string]int{}}
	var failingSince time.Time
	go func() {
		// A connection per call: each call finds its way (a Service's
		// backend, a route) anew, as a new client would.
		hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		for range time.Tick(100 * time.Millisecond) {
			answer, err := call(hc, url)
			mu.Lock()
			c.Calls++
			if err != nil {
				c.Failed++
				c.LastError = err.Error()
				if failingSince.IsZero() {
					failingSince = time.Now()
				}
				c.LongestOutage = max(c.LongestOutage, time.Since(failingSince))
			} else {
				c.OK++
				c.Answers[answer]++
				failingSince = time.Time{}
			}
			mu.Unlock()
		}
	}()
	mux := http.NewServeMux()
	mux.HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ready") })
	mux.HandleFunc("/counts", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		_ = json.NewEncoder(w).Encode(c)
	})
	return listenUntilTerm(addr, mux, nil)
}

func call(hc *http.Client, url string) (string, error) {
	resp, err := hc.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return strings.TrimSpace(string(body)), nil
}

// listenUntilTerm serves h on addr until SIGTERM, then calls stopping
// (when not nil) and ends.
func listenUntilTerm(addr string, h http.Handler, stopping func()) error {
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	errs := make(chan error, 1)
	go func() { errs <- srv.ListenAndServe() }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case err := <-errs:
		return err
	case <-sig:
		if stopping != nil {
			stopping()
		}
		return srv.Close()
	}
}
