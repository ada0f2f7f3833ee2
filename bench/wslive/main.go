// Command wslive is an open Live page for the speed benchmark: one /ws
// client of svc's UI server subscribed to the tasks, events and state
// streams (docs/api.md, "Live stream"), reading every frame as fast as it
// comes, as a browser would. It prints "subscribed" once the server
// acknowledged the subscription and, when stopped (SIGINT/SIGTERM), the
// frames and bytes it read per stream, the items the batch frames carried
// per stream, and the items the server reported dropped.
//
//	wslive -url ws://127.0.0.1:8080/ws [-token T]
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"sync"
	"syscall"

	"golang.org/x/net/websocket"
)

func main() {
	u := flag.String("url", "ws://127.0.0.1:8080/ws", "the UI server's /ws")
	token := flag.String("token", "", "ui.auth_token, if set")
	streams := flag.String("subscribe", `["tasks","events","state"]`, "JSON list of streams")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("wslive: ")
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
	ws, err := websocket.DialConfig(cfg)
	if err != nil {
		log.Fatal(err)
	}
	if err := websocket.Message.Send(ws, `{"subscribe":`+*streams+`}`); err != nil {
		log.Fatal(err)
	}
	var mu sync.Mutex
	frames, byteCount, items := map[string]int{}, map[string]int{}, map[string]int{}
	var dropped int64
	report := func() {
		mu.Lock()
		defer mu.Unlock()
		names := make([]string, 0, len(frames))
		for k := range frames {
			names = append(names, k)
		}
		sort.Strings(names)
		fmt.Print("wslive:")
		for _, k := range names {
			fmt.Printf(" %s=%d frames/%d bytes", k, frames[k], byteCount[k])
		}
		names = names[:0]
		for k := range items {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			fmt.Printf(" %s_items=%d", k, items[k])
		}
		fmt.Printf(" dropped_items=%d\n", dropped)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sig
		report()
		os.Exit(0)
	}()
	var msg struct {
		Stream string `json:"stream"`
		Data   struct {
			Count int64 `json:"count"`
		} `json:"data"`
	}
	for {
		var data []byte
		if err := websocket.Message.Receive(ws, &data); err != nil {
			report()
			log.Fatalf("receive: %v", err)
		}
		// Only the envelope's stream name is read; a browser would parse
		// the whole frame, which is the client's cost, not the worker's.
		stream := "?"
		if i := bytes.Index(data, []byte(`"stream":"`)); i >= 0 {
			rest := data[i+10:]
			if j := bytes.IndexByte(rest, '"'); j >= 0 {
				stream = string(rest[:j])
			}
		}
		if stream == "subscribed" || stream == "dropped" || stream == "error" {
			if json.Unmarshal(data, &msg) == nil && stream == "dropped" {
				mu.Lock()
				dropped += msg.Data.Count
				mu.Unlock()
			}
			if stream == "subscribed" {
				fmt.Println("subscribed")
			}
			if stream == "error" {
				log.Printf("server error frame: %s", data)
			}
		}
		mu.Lock()
		frames[stream]++
		byteCount[stream] += len(data)
		if stream == "batch" {
			// Items are {"stream":"tasks|events|state","data":...}. A
			// payload object starting with its own "stream" key would
			// count too; the bench's executors write none.
			for rest := data[1:]; ; {
				i := bytes.Index(rest, []byte(`{"stream":"`))
				if i < 0 {
					break
				}
				rest = rest[i+11:]
				if j := bytes.IndexByte(rest, '"'); j >= 0 {
					items[string(rest[:j])]++
				}
			}
		}
		mu.Unlock()
	}
}
