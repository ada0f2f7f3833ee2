#!/usr/bin/env bash
# One run of the recorder cost A/B: start svc with the flight recorder on
# (UI + storage.dir) or off (UI off), send a fixed number of 1 KiB requests
# through ingress -> cat, stop. Pair two modes under a whole-process timer
# (user+sys CPU of svc, its executors and the load generator):
#   bench/recorder-ab.sh on   vs   bench/recorder-ab.sh off
# Expects bin/ prepared by: bench/recorder-ab.sh build
set -euo pipefail
cd "$(dirname "$0")/.."
out=/tmp/svc-recorder-ab
if [ "${1:-}" = build ]; then
  mkdir -p $out
  CGO_ENABLED=0 go build -o $out/svc . && go build -o $out/load ./bench/load
  exit 0
fi
mode=$1
ui=false; dir=""
if [ "$mode" = on ]; then ui=true; dir="$out/storage"; rm -rf "$dir"; fi
cat > $out/$mode.toml <<TOML
[worker]
name = "ab"
[metrics]
enabled = false
[ui]
enabled = $ui
port = 18097
[storage]
dir = "$dir"
[executor]
binary_path = "$(command -v cat)"
pool_size = 8
[handler]
max_attempts = 1
[sources.http]
enabled = true
host = "127.0.0.1"
port = 18098
max_concurrent = 1024
TOML
$out/svc run -config $out/$mode.toml -log-level error &
pid=$!
for _ in $(seq 100); do curl -s -o /dev/null -XPOST --data x http://127.0.0.1:18098/v1/process && break; sleep 0.05; done
$out/load -n "${N:-3000}" -c 8
kill -INT $pid; wait $pid
