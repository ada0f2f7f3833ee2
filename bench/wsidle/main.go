// Command wsidle opens watchers that never read (issue 38): -n /ws
// sockets of svc's UI server, each subscribed (to tasks, events and state
// by default) and, once the server acknowledged, never read again: a stuck
// browser tab or a proxy that stopped forwarding. It prints "subscribed N"
// once all are, and when stopped (SIGINT/SIGTERM) how many the server had
// closed (shed) and how many were still open, by reading each for a
// moment.
//
//	wsidle -url ws://127.0.0.1:8080/ws -n 254 [-rcvbuf 4096] [-token T]
package main

import (
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/net/websocket"
)

func main() {
	u := flag.String("url", "ws://127.0.0.1:8080/ws", "the UI server's /ws")
	token := flag.String("token", "", "ui.auth_token, if set")
	streams := flag.String("subscribe", `["tasks","events","state"]`, "JSON list of streams")
	n := flag.Int("n", 254, "sockets")
	rcvbuf := flag.Int("rcvbuf", 0, "receive buffer of each socket in bytes (SO_RCVBUF; 0: the system's, which on loopback lets the kernel take megabytes before the server's writes block)")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("wsidle: ")
	pu, err := url.Parse(*u)
	if err != nil {
		log.Fatal(err)
	}
	cfg, err := websocket.NewConfig(*u, "http://"+pu.Host) // same origin, as the UI page
	if err != nil {
		log.Fatal(err)
	}
	if *token != "" {
		cfg.Header.Set("Authorization", "Bearer "+*token)
	}
	if *rcvbuf > 0 {
		cfg.Dialer = &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, *rcvbuf)
			}); err != nil {
				return err
			}
			return serr
		}}
	}
	socks := make([]*websocket.Conn, 0, *n)
	for range *n {
		ws, err := websocket.DialConfig(cfg)
		if err != nil {
			log.Fatalf("socket %d: %v", len(socks)+1, err)
		}
		if err := websocket.Message.Send(ws, `{"subscribe":`+*streams+`}`); err != nil {
			log.Fatal(err)
		}
		var ack string
		_ = ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		if err := websocket.Message.Receive(ws, &ack); err != nil || !strings.Contains(ack, `"subscribed"`) {
			log.Fatalf("socket %d: ack %q, %v", len(socks)+1, ack, err)
		}
		socks = append(socks, ws)
	}
	fmt.Printf("subscribed %d\n", len(socks))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	// Read what each socket holds: a socket the server closed ends (after
	// its last frames, a too_slow error frame when it could be sent); an
	// open one times out.
	closed, open, tooSlow := 0, 0, 0
	for _, ws := range socks {
		for {
			_ = ws.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			var msg string
			err := websocket.Message.Receive(ws, &msg)
			if err == nil {
				if strings.Contains(msg, `"too_slow"`) {
					tooSlow++
				}
				continue
			}
			if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
				open++
			} else {
				closed++
			}
			break
		}
		_ = ws.Close()
	}
	fmt.Printf("wsidle: sockets=%d closed_by_server=%d too_slow_frames=%d open=%d\n", len(socks), closed, tooSlow, open)
}
