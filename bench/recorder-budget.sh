#!/usr/bin/env bash
# The flight recorder at scale (issue 22): one worker at its top
# persistent-mode rate for DURATION seconds with a history budget of
# BUDGET bytes. It prints
#   - disk use of storage.dir + shared.dir, sampled every second (max),
#     against the budget (the live file is outside history.max_bytes);
#   - whether every failed task of the run can still be traced (one failing
#     request a second, its task id kept; each traced at the end);
#   - whether the Dashboard's counts equal the tasks sent;
#   - bytes per successful task in a sealed file (rows and indexes).
# Usage: bench/recorder-budget.sh [DURATION=600] [BUDGET=2147483648]
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${1:-600}
budget=${2:-2147483648}
out=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$out"' EXIT
CGO_ENABLED=0 go build -o "$out/svc" .
go build -o "$out/echo-go" ./testdata/executors/echo-go
go build -o "$out/load" ./bench/load
ui=18181 in=18198
cat >"$out/svc.toml" <<TOML
[worker]
name = "budget"
[metrics]
enabled = false
[ui]
host = "127.0.0.1"
port = $ui
[executor]
binary_path = "$out/echo-go"
mode = "persistent"
pool_size = 8
[handler]
max_attempts = 1
[sources.http]
enabled = true
host = "127.0.0.1"
port = $in
max_concurrent = 1024
max_concurrent_per_client = 1024
[storage]
dir = "$out/storage"
[shared]
dir = "$out/shared"
[history]
max_bytes = $budget
TOML
"$out/svc" run -config "$out/svc.toml" -log-level warn 2>"$out/svc.log" &
svc=$!
for _ in $(seq 100); do curl -s -o /dev/null -XPOST --data warm "http://127.0.0.1:$in/v1/process" && break; sleep 0.1; done
sent=1 # the warm-up request

# Disk use, every second.
(while kill -0 $svc 2>/dev/null; do du -sb "$out/storage" "$out/shared" 2>/dev/null | awk '{s+=$1} END {print s}'; sleep 1; done) >"$out/du.txt" &
sampler=$!

# One failing request a second, its task id kept.
(end=$((SECONDS + duration)); while [ $SECONDS -lt $end ]; do
  curl -s -XPOST --data "fail-$SECONDS" "http://127.0.0.1:$in/v1/process" | sed -n 's/.*"tasks":\[{"task_id":"\([^"]*\)".*/\1/p'
  sleep 1
done) >"$out/failed.txt" &
failer=$!

# The load: batches of 20,000 requests at 32 connections until the time is up.
end=$((SECONDS + duration))
while [ $SECONDS -lt $end ]; do
  "$out/load" -url "http://127.0.0.1:$in/v1/process" -n 20000 -c 32 >>"$out/load.txt"
  sent=$((sent + 20000))
done
wait $failer
failed=$(wc -l <"$out/failed.txt")
sent=$((sent + failed))
sleep 3 # let the recorder write what is queued
kill $sampler 2>/dev/null || true

max_du=$(sort -n "$out/du.txt" | tail -1)
counts=$(curl -s "http://127.0.0.1:$ui/api/v1/dashboard/counts")
total=$(echo "$counts" | sed -n 's/.*"total":\([0-9]*\).*/\1/p')
untraced=0
while read -r id; do
  if ! curl -s "http://127.0.0.1:$ui/api/v1/debug/trace?task_id=$id" | grep -q '"status":"failed"'; then
    untraced=$((untraced + 1))
  fi
done <"$out/failed.txt"
sealed=$(ls -S "$out"/shared/history/*/budget-*.db 2>/dev/null | head -1 || true)
per_task="-"
if [ -n "$sealed" ] && command -v sqlite3 >/dev/null; then
  rows=$(sqlite3 "$sealed" "SELECT count(*) FROM tasks WHERE status = 'ok'")
  per_task=$(( $(stat -c %s "$sealed") / (rows > 0 ? rows : 1) ))
fi
rate=$(awk '{n+=$1; t+=$1/$4} END {if (t>0) printf "%d", n/t}' <(grep -o '^[0-9]* requests c=32: [0-9]* req/s' "$out/load.txt" | awk '{print $1, $2, $3, $4}'))
echo "duration ${duration}s, ${sent} tasks sent (about ${rate} req/s), ${failed} failing"
echo "disk: max ${max_du} bytes (storage.dir + shared.dir, every second) against history.max_bytes ${budget}: $([ "$max_du" -le "$budget" ] && echo within || echo OVER)"
echo "counts: dashboard total ${total}, sent ${sent}: $([ "$total" = "$sent" ] && echo equal || echo DIFFERENT) ($(echo "$counts" | grep -o '"incomplete":[a-z]*,"lost_rows":[0-9]*'))"
echo "failed tasks traced: $((failed - untraced)) of ${failed}"
echo "bytes per successful task in a sealed file: ${per_task}"
echo "recorder: dropped and lost rows in the counts line above; history $(curl -s "http://127.0.0.1:$ui/api/v1/debug/databases" | grep -o '"history":{[^}]*}')"
kill -INT $svc
wait $svc || true
