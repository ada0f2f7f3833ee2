package main

// The multi-host harness of the network-fault tests (netfault_*_test.go):
// Linux network namespaces as hosts, each with one veth into a bridge that
// lives in a namespace of its own (the "switch"), so nothing is added to
// the host's own network namespace and the private subnet 10.213.0.0/24
// exists only inside the namespaces a lab creates. Two labs never share a
// switch, so every lab uses the same addresses. Hosts share the file
// system (the same temp dirs), which plays the shared folder.
//
// Faults are nftables rules in a host's namespace (drop to or from one
// peer or all, one direction or both) and its link going down and up;
// every fault is undone by the lab's cleanup, which deletes the
// namespaces (their veths, bridge and rules go with them). A lab's names
// carry the test process's pid, and a new lab first deletes the
// namespaces of labs whose process is gone.
//
// The test process itself takes part in the network from any host: a
// socket is created inside a namespace by a thread that entered it with
// setns(2) and is then discarded (runtime.LockOSThread without unlock),
// so the in-process kfake broker listens on the broker host's address and
// the test's Kafka and HTTP clients dial from the client host.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const (
	labPrefix = "svcnf"          // every namespace a lab creates starts with it
	labSubnet = "10.213.0.%d/24" // private, inside the lab's namespaces only
)

// labHostOctets are the last octets of the lab's well-known hosts; the
// workers are w1..w9 at .11-.19.
var labHostOctets = map[string]int{"broker": 1, "client": 2}

var labSeq atomic.Int32

// lab is one private network: a switch namespace with a bridge and a
// namespace per host.
type lab struct {
	t      *testing.T
	id     string // prefix of its namespace names
	sw     string // the switch namespace
	hosts  map[string]*labHost
	shared string // the folder every host sees
}

// labHost is one host of a lab.
type labHost struct {
	lab  *lab
	name string
	ns   string // its network namespace
	ip   string // its address, without the prefix length
}

// needLab skips the test under -short, and when the harness cannot run
// here (not root, no ip or nft): a skip outside CI, a failure in CI
// (where .ci/run installs the tools and runs as root).
func needLab(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("netfault: -short skips the multi-host network harness (network namespaces, nftables, partitions of 5 s to 3 minutes)")
	}
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root (to create network namespaces)")
	}
	for _, tool := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if runtime.GOOS != "linux" || setnsTrap() == 0 {
		missing = append(missing, "linux on amd64 or arm64 (setns)")
	}
	if len(missing) > 0 {
		if os.Getenv("CI") != "" {
			t.Fatalf("netfault: the harness needs %s; CI installs nftables and iproute2 and runs as root", strings.Join(missing, ", "))
		}
		t.Skipf("netfault: the harness needs %s", strings.Join(missing, ", "))
	}
}

// setnsTrap is setns(2)'s system call number, 0 where unknown (the
// syscall package does not export it for amd64).
func setnsTrap() uintptr {
	switch runtime.GOARCH {
	case "amd64":
		return 308
	case "arm64":
		return 268
	}
	return 0
}

// newLab creates a lab with a broker, a client and the given number of
// worker hosts (w1, w2, ...), deleted when the test ends.
func newLab(t *testing.T, workers int) *lab {
	t.Helper()
	needLab(t)
	sweepLabs(t)
	l := &lab{
		t:      t,
		id:     fmt.Sprintf("%s%d-%d", labPrefix, os.Getpid(), labSeq.Add(1)),
		hosts:  map[string]*labHost{},
		shared: t.TempDir(),
	}
	l.sw = l.id + "-sw"
	t.Cleanup(l.destroy)
	l.must("ip", "netns", "add", l.sw)
	l.must("ip", "-n", l.sw, "link", "set", "lo", "up")
	l.must("ip", "-n", l.sw, "link", "add", "br0", "type", "bridge")
	l.must("ip", "-n", l.sw, "link", "set", "br0", "up")
	names := []string{"broker", "client"}
	for i := 1; i <= workers; i++ {
		names = append(names, fmt.Sprintf("w%d", i))
	}
	for _, name := range names {
		octet, ok := labHostOctets[name]
		if !ok {
			n, _ := strconv.Atoi(strings.TrimPrefix(name, "w"))
			octet = 10 + n
		}
		h := &labHost{lab: l, name: name, ns: l.id + "-" + name, ip: fmt.Sprintf(strings.TrimSuffix(labSubnet, "/24"), octet)}
		l.must("ip", "netns", "add", h.ns)
		l.must("ip", "-n", h.ns, "link", "set", "lo", "up")
		// The veth is made in the switch namespace with its peer moved
		// into the host's at once: no name ever exists in the host's own
		// namespace.
		l.must("ip", "-n", l.sw, "link", "add", name, "type", "veth", "peer", "name", "eth0", "netns", h.ns)
		l.must("ip", "-n", l.sw, "link", "set", name, "master", "br0", "up")
		l.must("ip", "-n", h.ns, "addr", "add", fmt.Sprintf(labSubnet, octet), "dev", "eth0")
		l.must("ip", "-n", h.ns, "link", "set", "eth0", "up")
		l.hosts[name] = h
	}
	return l
}

// host returns the lab's host by name.
func (l *lab) host(name string) *labHost {
	h := l.hosts[name]
	if h == nil {
		l.t.Fatalf("lab has no host %q", name)
	}
	return h
}

// must runs a command, failing the test when it fails.
func (l *lab) must(args ...string) {
	l.t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		l.t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// destroy deletes the lab's namespaces (with their veths, bridge and
// nftables rules).
func (l *lab) destroy() {
	for _, h := range l.hosts {
		_ = exec.Command("ip", "netns", "del", h.ns).Run()
	}
	_ = exec.Command("ip", "netns", "del", l.sw).Run()
}

// sweepLabs deletes the namespaces left by labs of test processes that are
// gone (killed before their cleanup ran).
func sweepLabs(t *testing.T) {
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, labPrefix) {
			continue
		}
		pidStr, _, _ := strings.Cut(strings.TrimPrefix(name, labPrefix), "-")
		pid, err := strconv.Atoi(pidStr)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
				t.Logf("netfault: sweeping leftover namespace %s: %v %s", name, err, out)
			}
		}
	}
}

// inNS runs f on a thread that entered the host's network namespace: the
// sockets f creates belong to that namespace for their whole life. The
// thread is discarded afterwards (locked, never unlocked).
func (h *labHost) inNS(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := os.Open(filepath.Join("/run/netns", h.ns))
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer fd.Close()
		if _, _, e := syscall.RawSyscall(setnsTrap(), fd.Fd(), syscall.CLONE_NEWNET, 0); e != 0 {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", h.ns, e)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// listen opens a TCP listener on the host's address.
func (h *labHost) listen(port int) (net.Listener, error) {
	var ln net.Listener
	err := h.inNS(func() (err error) {
		ln, err = net.Listen("tcp", net.JoinHostPort(h.ip, strconv.Itoa(port)))
		return err
	})
	return ln, err
}

// dial connects from the host.
func (h *labHost) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := h.inNS(func() (err error) {
		c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// httpClient is an HTTP client whose connections start from the host
// (127.0.0.1 is then the host's own loopback).
func (h *labHost) httpClient() *http.Client {
	return &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{DialContext: h.dial, DisableKeepAlives: true},
	}
}

// command is cmd run inside the host's network namespace.
func (h *labHost) command(bin string, args ...string) []string {
	return append([]string{"ip", "netns", "exec", h.ns, bin}, args...)
}

// nft applies an nftables script in the host's namespace.
func (h *labHost) nft(script string) {
	h.lab.t.Helper()
	cmd := exec.Command("ip", "netns", "exec", h.ns, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		h.lab.t.Fatalf("nft in %s: %v\n%s\nscript:\n%s", h.name, err, out, script)
	}
}

// direction of a dropped flow, seen from the host with the fault.
type direction int

const (
	both     direction = iota
	outbound           // the host's packets to the peer are dropped
	inbound            // the peer's packets to the host are dropped
)

// partition drops the host's traffic with peers (all other hosts when
// none is named) in the given direction, until heal. Packets are dropped,
// not refused: the host's connections hang as on a real partition.
func (h *labHost) partition(dir direction, peers ...*labHost) {
	h.lab.t.Helper()
	match := func(field string) string {
		if len(peers) == 0 {
			return fmt.Sprintf("ip %s 10.213.0.0/24", field)
		}
		var ips []string
		for _, p := range peers {
			ips = append(ips, p.ip)
		}
		return fmt.Sprintf("ip %s { %s }", field, strings.Join(ips, ", "))
	}
	var rules []string
	if dir == both || dir == outbound {
		rules = append(rules, "chain out { type filter hook output priority 0; policy accept; "+match("daddr")+" counter drop; }")
	}
	if dir == both || dir == inbound {
		rules = append(rules, "chain in { type filter hook input priority 0; policy accept; "+match("saddr")+" counter drop; }")
	}
	h.nft("table inet netfault {\n" + strings.Join(rules, "\n") + "\n}\n")
}

// heal removes every drop rule of the host.
func (h *labHost) heal() {
	h.lab.t.Helper()
	h.nft("delete table inet netfault\n")
}

// linkDown takes the host's link down (its address and routes go with
// it); linkUp brings it back with its address.
func (h *labHost) linkDown() { h.lab.must("ip", "-n", h.ns, "link", "set", "eth0", "down") }
func (h *labHost) linkUp()   { h.lab.must("ip", "-n", h.ns, "link", "set", "eth0", "up") }
