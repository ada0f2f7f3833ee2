// Command minimal is the comparison server for the ingress benchmark: the
// smallest net/http server that spawns the executor per request and answers
// its output.
package main

import (
	"bytes"
	"flag"
	"io"
	"log"
	"net/http"
	"os/exec"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18099", "listen address")
	bin := flag.String("bin", "cat", "executor")
	flag.Parse()
	http.HandleFunc("POST /v1/process", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		cmd := exec.Command(*bin)
		cmd.Stdin = bytes.NewReader(body)
		out, err := cmd.Output()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		_, _ = w.Write(out)
	})
	log.Fatal(http.ListenAndServe(*addr, nil))
}
