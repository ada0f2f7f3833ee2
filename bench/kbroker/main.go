// Command kbroker runs a one-broker franz-go kfake cluster in its own
// process on a loopback port, for the Kafka speed benchmarks: the broker's
// CPU and memory stay out of the worker's figures. It prints the broker's
// address on stdout (one line) once it listens and runs until killed
// (SIGINT or SIGTERM).
//
//	kbroker [-host 127.0.0.1] [-port 0] -partitions 6 -topics in,out,in_dlq
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

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
	fmt.Println(addr)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	c.Close()
}
