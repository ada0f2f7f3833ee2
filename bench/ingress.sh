#!/usr/bin/env bash
# Ingress benchmark (issue 2): HTTP ingress -> exec handler -> cat -> response,
# 1 KiB bodies, load from wrk in a second process on loopback, beside a bare
# os/exec spawn loop of the same executor and a minimal net/http server that
# spawns it, all in one run. Needs wrk (apt-get install wrk).
# Usage: bench/ingress.sh [duration, default 10s]
set -euo pipefail
cd "$(dirname "$0")/.."
dur=${1:-10s}
out=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$out"' EXIT
CGO_ENABLED=0 go build -o "$out/svc" .
go build -o "$out/spawnloop" ./bench/spawnloop
go build -o "$out/minimal" ./bench/minimal
cat_bin=$(command -v cat)

# run_svc NAME C UI_ENABLED STORAGE_DIR: one svc run under wrk.
run_svc() {
  local name=$1 c=$2 ui=$3 dir=$4
  cat > "$out/svc.toml" <<TOML
[worker]
name = "bench"
[metrics]
enabled = false
[ui]
enabled = $ui
port = 18097
[storage]
dir = "$dir"
[executor]
binary_path = "$cat_bin"
pool_size = $c
[handler]
max_attempts = 1
[sources.http]
enabled = true
host = "127.0.0.1"
port = 18098
max_concurrent = 1024
TOML
  rm -rf "$out/storage"
  "$out/svc" run -config "$out/svc.toml" -log-level warn 2>"$out/svc.log" &
  svc_pid=$!
  for _ in $(seq 50); do curl -s -o /dev/null -XPOST --data x http://127.0.0.1:18098/v1/process && break; sleep 0.1; done
  sleep 1
  echo "svc idle RSS: $(awk '/VmRSS/{print $2" "$3}' /proc/$svc_pid/status)"
  echo "== svc ingress ($name) c=$c"
  wrk -t2 -c$c -d"$dur" --latency -s bench/post.lua http://127.0.0.1:18098/v1/process | grep -E "Requests/sec|50%|99%|Non-2xx|Socket errors"
  echo "svc RSS after load: $(awk '/VmRSS/{print $2" "$3}' /proc/$svc_pid/status), peak $(awk '/VmHWM/{print $2" "$3}' /proc/$svc_pid/status)"
  kill -INT $svc_pid; wait $svc_pid || true
}

for c in 8 32; do
  run_svc "recorder off" $c false ""
  run_svc "UI + recorder on disk" $c true "$out/storage"

  "$out/minimal" -addr 127.0.0.1:18099 -bin "$cat_bin" &
  min_pid=$!
  sleep 0.5
  echo "== minimal net/http c=$c"
  wrk -t2 -c$c -d"$dur" --latency -s bench/post.lua http://127.0.0.1:18099/v1/process | grep -E "Requests/sec|50%|99%|Non-2xx|Socket errors"
  kill $min_pid; wait $min_pid 2>/dev/null || true

  echo "== bare spawn loop c=$c"
  "$out/spawnloop" -bin "$cat_bin" -c $c -d "$dur"
done
