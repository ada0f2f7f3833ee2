#!/usr/bin/env bash
# Idle watchers (issue 38): the HTTP ingress rate, worker CPU a request,
# p99 and peak RSS of `svc run` (HTTP ingress, echo-go persistent pool 8,
# the recorder file on) with no /ws watcher and with WATCHERS sockets
# subscribed to tasks, events and state that never read (bench/wsidle),
# bench/load at c=8, rounds interleaved. bench/RESULTS.md has the latest
# figures; docs/operations.md, "Live stream (/ws) limits", the bounds.
#
# Usage: bench/wsidle.sh [rounds, default 3]
# Environment: HTTP_N (measured requests a run, default 30000), WATCHERS
# (default 254), WSIDLE_FLAGS (e.g. "-rcvbuf 4096": watchers whose
# receive buffers fill at once), SVC_B (another svc binary, e.g. built
# from the parent commit: its runs interleaved beside svc's).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
n=${HTTP_N:-30000}
watchers=${WATCHERS:-254}
out=$(mktemp -d /tmp/svc-wsidle.XXXXXX)
b=$out/bin
mkdir -p "$b"
trap 'for p in $(jobs -p); do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$out"' EXIT
CGO_ENABLED=0 go build -o "$b/svc" .
go build -o "$b/" ./bench/load ./bench/wsidle ./bench/kdrive ./testdata/executors/echo-go
suts="svc"
if [ -n "${SVC_B:-}" ]; then cp "$SVC_B" "$b/svc-b"; suts="svc svc-b"; fi
echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
freeport() { "$b/kdrive" freeport; }
for r in $(seq "$rounds"); do
  for sut in $suts; do
    for w in 0 "$watchers"; do
      port=$(freeport); ui=$(freeport)
      rm -rf "$out/st"; mkdir -p "$out/st"
      cat >"$out/svc.toml" <<TOML
[worker]
name = "wsidle"
[metrics]
host = "127.0.0.1"
port = $(freeport)
[ui]
port = $ui
[storage]
dir = "$out/st"
[executor]
binary_path = "$b/echo-go"
mode = "persistent"
pool_size = 8
[sources.http]
enabled = true
host = "127.0.0.1"
port = $port
max_concurrent_per_client = 1024
TOML
      "$b/$sut" run -config "$out/svc.toml" 2>"$out/$sut.log" >&2 &
      p=$!
      for _ in $(seq 300); do "$b/load" -url "http://127.0.0.1:$port/v1/process" -n 1 -c 1 >/dev/null 2>&1 && break; sleep 0.1; done
      ws=
      if [ "$w" -gt 0 ]; then
        # shellcheck disable=SC2086
        "$b/wsidle" -url "ws://127.0.0.1:$ui/ws" -n "$w" ${WSIDLE_FLAGS:-} >"$out/wsidle.txt" 2>&1 &
        ws=$!
        for _ in $(seq 600); do grep -q subscribed "$out/wsidle.txt" && break; sleep 0.05; done
        grep -q subscribed "$out/wsidle.txt" || { echo "wsidle did not subscribe:"; cat "$out/wsidle.txt"; exit 1; }
      fi
      "$b/load" -url "http://127.0.0.1:$port/v1/process" -n "$n" -c 8 -warmup 1000 -min-bytes 1024 -pid "$p" \
        -label "round=$r sut=$sut watchers=$w" >"$out/load.txt"
      echo "round $r $sut watchers=$w: $(head -1 "$out/load.txt")"
      kill -TERM "$p"; wait "$p" || true
      if [ -n "$ws" ]; then kill -TERM "$ws"; wait "$ws" || true; fi
    done
  done
done
