// Command minimal is the bare HTTP floor of the ingress benchmarks: the
// smallest net/http server that runs the executor per request and answers
// its output. By default it spawns the executor per request (os/exec);
// with -persistent it keeps -pool-size persistent children (protocol v2)
// and sends each request to an idle one through the benchmarks' own frame
// client (bench/internal/frames), not svc's worker/executor pool, so the
// floor does not move when svc's pool gets faster.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os/exec"

	"svc/bench/internal/frames"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18099", "listen address")
	bin := flag.String("bin", "cat", "executor")
	persistent := flag.Bool("persistent", false, "keep persistent children (protocol v2) instead of spawning per request")
	poolSize := flag.Int("pool-size", 8, "persistent children")
	flag.Parse()
	run := func(w http.ResponseWriter, body []byte) error {
		cmd := exec.Command(*bin)
		cmd.Stdin = bytes.NewReader(body)
		out, err := cmd.Output()
		if err != nil {
			return err
		}
		_, _ = w.Write(out)
		return nil
	}
	if *persistent {
		idle := make(chan *frames.Child, *poolSize)
		for i := range *poolSize {
			c, err := frames.Start(fmt.Sprintf("minimal-%d", i), *bin)
			if err != nil {
				log.Fatal(err)
			}
			idle <- c
		}
		run = func(w http.ResponseWriter, body []byte) error {
			c := <-idle
			defer func() { idle <- c }()
			out, err := c.Do(frames.Task{Source: "http"}, body)
			if err != nil {
				return err
			}
			_, _ = w.Write(out) // out is valid until the child's next task
			return nil
		}
	}
	http.HandleFunc("POST /v1/process", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := run(w, body); err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
		}
	})
	log.Fatal(http.ListenAndServe(*addr, nil))
}
