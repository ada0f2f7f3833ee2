#!/usr/bin/env bash
# Persistent-mode ingress benchmark (issue 11): HTTP ingress -> exec handler
# -> persistent pool of the Go echo executor (testdata/executors/echo-go) ->
# response, 1 KiB bodies, load from bench/load in a second process on
# loopback; beside a bare net/http server driving the same persistent pool,
# and the ingress in mode spawn with cat, all in one run.
# Usage: bench/persistent.sh [requests, default 50000]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-50000}
out=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$out"' EXIT
CGO_ENABLED=0 go build -o "$out/svc" .
go build -o "$out/echo-go" ./testdata/executors/echo-go
go build -o "$out/minimal" ./bench/minimal
go build -o "$out/load" ./bench/load
pool=${POOL_SIZE:-2}

# run_svc MODE BIN C N: one svc run under load, with worker CPU per request.
run_svc() {
  local mode=$1 bin=$2 c=$3 n=$4
  cat > "$out/svc.toml" <<TOML
[worker]
name = "bench"
[metrics]
enabled = false
[ui]
enabled = false
[executor]
binary_path = "$bin"
mode = "$mode"
pool_size = $pool
[handler]
max_attempts = 1
[sources.http]
enabled = true
host = "127.0.0.1"
port = 18098
max_concurrent = 1024
TOML
  "$out/svc" run -config "$out/svc.toml" -log-level warn 2>"$out/svc.log" &
  local pid=$!
  for _ in $(seq 50); do curl -s -o /dev/null -XPOST --data x http://127.0.0.1:18098/v1/process && break; sleep 0.1; done
  local t0; t0=$(awk '{print $14+$15}' /proc/$pid/stat)
  echo -n "svc ingress, mode $mode: "
  "$out/load" -url http://127.0.0.1:18098/v1/process -n "$n" -c "$c"
  local t1; t1=$(awk '{print $14+$15}' /proc/$pid/stat)
  echo "  worker CPU per request: $(( (t1 - t0) * 1000000 / $(getconf CLK_TCK) / n )) µs (excluding the executor)"
  kill -INT $pid; wait $pid || true
}

for c in 8 32; do
  run_svc persistent "$out/echo-go" $c "$n"
  "$out/minimal" -addr 127.0.0.1:18099 -bin "$out/echo-go" -persistent -pool-size "$pool" &
  min_pid=$!
  sleep 0.5
  echo -n "bare net/http + persistent pool: "
  "$out/load" -url http://127.0.0.1:18099/v1/process -n "$n" -c "$c"
  kill $min_pid; wait $min_pid 2>/dev/null || true
  run_svc spawn "$(command -v cat)" $c 3000
done
