package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
)

// FreeAddr returns a loopback address whose port was free a moment ago,
// for a server that must be given its address up front.
//
// The port comes from below the kernel's ephemeral range, so that no
// outgoing connection can take it between this check and the server's bind
// (a port the kernel handed out for ":0" is also one it hands to clients);
// and no port is returned twice by one process.
func FreeAddr(t T) string {
	t.Helper()
	return freeAddrOn(t, "127.0.0.1")
}

// portsLow is where the ports FreeAddr hands out begin.
const portsLow = 20000

var ports struct {
	sync.Mutex
	given map[int]bool
	high  int // the first port not handed out: the ephemeral range's start
}

// freeAddrOn is FreeAddr on another local IP address.
func freeAddrOn(t T, ip string) string {
	t.Helper()
	ports.Lock()
	defer ports.Unlock()
	if ports.given == nil {
		ports.given, ports.high = map[int]bool{}, ephemeralStart()
	}
	for range 200 {
		port := portsLow + rand.IntN(ports.high-portsLow)
		if ports.given[port] {
			continue
		}
		addr := net.JoinHostPort(ip, strconv.Itoa(port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		ln.Close()
		ports.given[port] = true
		return addr
	}
	t.Fatalf("testenv: no free port on %s between %d and %d after 200 tries", ip, portsLow, ports.high)
	return ""
}

// ephemeralStart is the first port of the kernel's ephemeral range
// (32768 when it cannot be read).
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	var low, high int
	if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &low, &high); err != nil || low <= portsLow+1000 {
		return 32768
	}
	return low
}
