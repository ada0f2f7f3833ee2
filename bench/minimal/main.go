// Command minimal is the comparison server for the ingress benchmarks: the
// smallest net/http server that runs the executor per request and answers
// its output. With -persistent it sends each request to a persistent
// executor pool (worker/executor) instead of spawning.
package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"log"
	"net/http"
	"os/exec"
	"strconv"

	"svc/worker"
	"svc/worker/executor"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18099", "listen address")
	bin := flag.String("bin", "cat", "executor")
	persistent := flag.Bool("persistent", false, "use a persistent executor pool (protocol v2) instead of spawning")
	poolSize := flag.Int("pool-size", 2, "persistent pool size")
	flag.Parse()
	run := func(body []byte) ([]byte, error) {
		cmd := exec.Command(*bin)
		cmd.Stdin = bytes.NewReader(body)
		return cmd.Output()
	}
	if *persistent {
		pool, err := executor.NewPool(executor.Options{Mode: executor.ModePersistent, BinaryPath: *bin, PoolSize: *poolSize, MaxAttempts: 1})
		if err != nil {
			log.Fatal(err)
		}
		defer pool.Close()
		var n int64
		run = func(body []byte) ([]byte, error) {
			n++
			res := pool.Run(context.Background(), &worker.Task{ID: strconv.FormatInt(n, 10), Input: body})
			return res.Output, res.Err
		}
	}
	http.HandleFunc("POST /v1/process", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		out, err := run(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		_, _ = w.Write(out)
	})
	log.Fatal(http.ListenAndServe(*addr, nil))
}
