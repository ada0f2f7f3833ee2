// Command kbroker runs a one-broker franz-go kfake cluster in its own
// process on a loopback port, for the Kafka speed benchmarks: the broker's
// CPU and memory stay out of the worker's figures. It prints the broker's
// address on stdout (one line) once it listens and runs until killed
// (SIGINT or SIGTERM).
//
//	kbroker [-host 127.0.0.1] [-port 0] -partitions 6 -topics in,out,in_dlq
//
// On SIGUSR1 it writes the requests it handled since the last SIGUSR1 to
// stderr, one line: each request kind with its count, and the records the
// produce requests carried (how well a client batches is broker CPU).
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// stats counts the requests by kind, and the records of produce requests.
type stats struct {
	mu       sync.Mutex
	n        map[string]int
	produced int
}

func (s *stats) count(req kmsg.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n == nil {
		s.n = map[string]int{}
	}
	s.n[kmsg.NameForKey(req.Key())]++
	if p, ok := req.(*kmsg.ProduceRequest); ok {
		for _, t := range p.Topics {
			for _, pt := range t.Partitions {
				var b kmsg.RecordBatch
				if b.ReadFrom(pt.Records) == nil {
					s.produced += int(b.NumRecords)
				}
			}
		}
	}
}

// take returns the counts as one line and resets them.
func (s *stats) take() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.n))
	for k := range s.n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString("requests:")
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%d", k, s.n[k])
	}
	fmt.Fprintf(&b, " produced_records=%d", s.produced)
	s.n, s.produced = nil, 0
	return b.String()
}

func main() {
	host := flag.String("host", "127.0.0.1", "listen address (a loopback one)")
	port := flag.Int("port", 0, "listen port (0: a free one)")
	partitions := flag.Int("partitions", 6, "partitions of the seeded topics")
	topics := flag.String("topics", "", "comma-separated topics to create at start (e.g. in,out,in_dlq)")
	addrFile := flag.String("addr-file", "", "also write the address to this file")
	flag.Parse()
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(*port),
		// Group sessions may be short, so a killed member leaves quickly.
		kfake.GroupMinSessionTimeout(500 * time.Millisecond),
	}
	if *host != "127.0.0.1" {
		// kfake listens on 127.0.0.1; it advertises what it listens on.
		opts = append(opts, kfake.ListenFn(func(network, addr string) (net.Listener, error) {
			_, p, _ := net.SplitHostPort(addr)
			return net.Listen(network, net.JoinHostPort(*host, p))
		}))
	}
	if *topics != "" {
		opts = append(opts, kfake.SeedTopics(int32(*partitions), strings.Split(*topics, ",")...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		log.Fatalf("kbroker: %v", err)
	}
	addr := c.ListenAddrs()[0]
	if *addrFile != "" {
		if err := os.WriteFile(*addrFile, []byte(addr+"\n"), 0o644); err != nil {
			log.Fatalf("kbroker: %v", err)
		}
	}
	var st stats
	c.Control(func(req kmsg.Request) (kmsg.Response, error, bool) {
		st.count(req)
		return nil, nil, false
	})
	fmt.Println(addr)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGUSR1)
	for s := range sig {
		if s != syscall.SIGUSR1 {
			break
		}
		fmt.Fprintln(os.Stderr, st.take())
	}
	c.Close()
}
