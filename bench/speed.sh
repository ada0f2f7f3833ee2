#!/usr/bin/env bash
# Speed benchmark (issue 23): svc beside bare floors in one run, interleaved
# round by round, 1 KiB messages, executor mode persistent with pool 8 and
# the Go echo executor (testdata/executors/echo-go), default config
# otherwise (flight recorder file in storage.dir, metrics, runtime health,
# UI on; ports are free ones picked per run). Rows:
#
#   kafka   a backlog of RECORDS records over 6 partitions on a kfake broker
#           in its own process (bench/kbroker) -> svc run (Kafka source, one
#           sink, default DLQ) vs bench/kfloor (bare franz-go group consumer
#           -> 8 persistent children -> produce -> commit marks); measured by
#           bench/kdrive (msgs/s, worker CPU per message, peak RSS; commits
#           reach the end, nothing lost or duplicated, per-key order kept,
#           DLQ empty); fresh topics and group per run. svc-eos is svc
#           with sources.kafka.delivery = "exactly_once", measured until
#           its commits reach the end (its results are then visible to
#           read_committed consumers) and verified read_committed
#   http8   POST /v1/process at 8 and 32 connections (bench/load): svc vs
#   http32  bench/minimal -persistent (bare net/http + 8 children), plus svc
#           with storage.dir = "" (memory-only: the recorder cost) and svc
#           with one Live page open (bench/wslive: /ws subscribed to tasks,
#           events and state: the Live cost)
#   spawn8  mode spawn, cat, 8 connections (SPAWN_C): svc vs bench/minimal
#           (net/http + os/exec per request)
#   Benthos (only with BENTHOS=/path/to/binary, a Benthos v4 build with its
#           pure and io components): http_server -> subprocess of
#           bench/lpecho (length-prefixed frames) -> sync_response,
#           pipeline.threads 8, with 8 children (round robin over 8
#           subprocess resources) and with 1 (one subprocess processor)
#
# Usage: bench/speed.sh [rounds, default 3] [records, default 20000]
# Environment: HTTP_N (measured requests per HTTP run, default 30000:
# with 10000, about a second a run, the HTTP rows moved 20-35 % between
# rounds on a busy 2-core host),
# WARMUP (unmeasured requests first, default 1000, at most a fifth of the
# run), SPAWN_N (default 1000), SPAWN_C (connections of the spawn runs,
# default "8"; "8 32" adds 32), POOL (default 8), KEYS (default 1000),
# PARTITIONS (default 6), ONLY (comma list of kafka,http,spawn,benthos;
# default all), BENTHOS, RESULTS (file keeping the raw per-run lines;
# default /tmp/svc-speed-<time>.txt), KEEP=1 keeps the work folder (logs,
# configs), SVC_B (another svc binary, e.g. one built from the parent
# commit: adds svc-b runs beside svc's in the kafka and http groups, same
# config, and a row comparing the two: an A/B in one run), SVC_FLAGS (flags
# of svc run, e.g. "-cpuprofile F"), SVC_KAFKA
# (keys added to svc's [sources.kafka]), SVC_SINK (lines added to its sink's
# [[sinks.kafka]] table), SVC_TOML (tables added to svc's
# config).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
records=${2:-20000}
http_n=${HTTP_N:-30000}
warmup=${WARMUP:-1000}
spawn_n=${SPAWN_N:-1000}
spawn_paths=$(for c in ${SPAWN_C:-8}; do echo -n "spawn$c "; done)
pool=${POOL:-8}
keys=${KEYS:-1000}
partitions=${PARTITIONS:-6}
only=${ONLY:-kafka,http,spawn,benthos}
results=${RESULTS:-/tmp/svc-speed-$(date +%Y%m%d-%H%M%S).txt}
out=$(mktemp -d /tmp/svc-speed.XXXXXX)
bin=$out/bin
mkdir -p "$bin"
trap 'for p in $(jobs -p); do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$out"' EXIT
has() { [[ ",$only," == *",$1,"* ]]; }

echo "building into $out ..."
CGO_ENABLED=0 go build -o "$bin/svc" .
go build -o "$bin/echo-go" ./testdata/executors/echo-go
go build -o "$bin/" ./bench/kbroker ./bench/kfloor ./bench/kdrive ./bench/minimal ./bench/load ./bench/wslive ./bench/speedtable ./bench/lpecho
echo_go=$bin/echo-go
cat_bin=$(command -v cat)
: >"$results"
echo "raw results: $results"
echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"

freeport() { "$bin/kdrive" freeport; }

# svc_config FILE STORAGE_DIR MODE BIN SOURCE...: a default config plus what
# the run needs: free ports, storage.dir, the executor, and the source
# (SOURCE is "http PORT" or "kafka BROKER IN OUT GROUP").
svc_config() {
  local file=$1 dir=$2 mode=$3 exe=$4 src=$5
  cat >"$file" <<TOML
[worker]
name = "speed"
[metrics]
host = "127.0.0.1"
port = $(freeport)
[ui]
port = $ui_port
[storage]
dir = "$dir"
[executor]
binary_path = "$exe"
mode = "$mode"
pool_size = $pool
TOML
  if [ "$src" = http ]; then
    # max_concurrent_per_client: bench/load's connections all come from
    # 127.0.0.1, one client to the ingress; the default 16 would answer
    # 429 at 32 connections.
    cat >>"$file" <<TOML
[sources.http]
enabled = true
host = "127.0.0.1"
port = $6
max_concurrent_per_client = 1024
TOML
  else
    cat >>"$file" <<TOML
[sources.kafka]
enabled = true
brokers = ["$6"]
topic = "$7"
group = "$9"
${SVC_KAFKA:-}
[[sinks.kafka]]
name = "out"
topic = "$8"
${SVC_SINK:-}
TOML
  fi
  # SVC_KAFKA: extra keys of the [sources.kafka] table (Kafka runs), e.g.
  # "fetch_buffer_bytes = 8388608". SVC_TOML: extra config appended to
  # svc's file (whole tables, e.g.
  # $'[pipeline]\nmax_in_flight = 128').
  if [ -n "${SVC_TOML:-}" ]; then printf '%s\n' "$SVC_TOML" >>"$file"; fi
}

# start_svc CONFIG LOG SUT: starts svc in the background (SVC_B's binary
# for the system under test svc-b); sets pid.
start_svc() {
  local exe=$bin/svc
  [ "$3" = svc-b ] && exe=$SVC_B
  # SVC_FLAGS: extra flags of svc run, e.g. "-cpuprofile /tmp/svc.prof".
  # shellcheck disable=SC2086
  "$exe" run -config "$1" ${SVC_FLAGS:-} 2>"$2" >&2 &
  pid=$!
}

# stop PID: SIGTERM and wait.
stop() {
  kill -TERM "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

# wait_http PORT PID LOG: until the server on PORT answers a POST.
wait_http() {
  for _ in $(seq 300); do
    if "$bin/load" -url "http://127.0.0.1:$1/v1/process" -n 1 -c 1 >/dev/null 2>&1; then return 0; fi
    if ! kill -0 "$2" 2>/dev/null; then echo "server exited:"; tail -20 "$3"; return 1; fi
    sleep 0.1
  done
  echo "server on port $1 not ready after 30 s"; tail -20 "$3"; return 1
}

# load_runs ROUND PATHS SUT PORT PID: the measured load runs against one
# server, one per concurrency in PATHS (http8, http32, spawn8).
load_runs() {
  local round=$1 paths=$2 sut=$3 port=$4 p=$5 path c n
  for path in $paths; do
    c=${path//[a-z]/}
    n=$http_n
    [ "${path#spawn}" != "$path" ] && n=$spawn_n
    "$bin/load" -url "http://127.0.0.1:$port/v1/process" -n "$n" -c "$c" -warmup $((n / 5 < warmup ? n / 5 : warmup)) \
      -min-bytes 1024 -pid "$p" -label "round=$round path=$path sut=$sut" >"$out/load.txt"
    echo "  $path $sut: $(head -1 "$out/load.txt")"
    tail -1 "$out/load.txt" >>"$results"
  done
}

# http_svc ROUND SUT STORAGE_DIR MODE EXE PATHS [live]
http_svc() {
  local round=$1 sut=$2 dir=$3 mode=$4 exe=$5 paths=$6 live=${7:-} port ws=
  port=$(freeport)
  ui_port=$(freeport)
  [ -n "$dir" ] && rm -rf "$dir" && mkdir -p "$dir"
  svc_config "$out/svc.toml" "$dir" "$mode" "$exe" http "$port"
  start_svc "$out/svc.toml" "$out/svc-$sut.log" "$sut"
  local p=$pid
  wait_http "$port" "$p" "$out/svc-$sut.log"
  if [ -n "$live" ]; then
    "$bin/wslive" -url "ws://127.0.0.1:$ui_port/ws" >"$out/wslive.txt" 2>&1 &
    ws=$!
    for _ in $(seq 100); do grep -q subscribed "$out/wslive.txt" && break; sleep 0.05; done
    grep -q subscribed "$out/wslive.txt" || { echo "wslive did not subscribe:"; cat "$out/wslive.txt"; exit 1; }
  fi
  load_runs "$round" "$paths" "$sut" "$port" "$p"
  if [ -n "$ws" ]; then
    kill -TERM "$ws"; wait "$ws" 2>/dev/null || true
    echo "  $(tail -1 "$out/wslive.txt")"
  fi
  stop "$p"
}

# http_floor ROUND PATHS ARGS...: bench/minimal with ARGS.
http_floor() {
  local round=$1 paths=$2 port
  shift 2
  port=$(freeport)
  "$bin/minimal" -addr "127.0.0.1:$port" "$@" 2>"$out/minimal.log" &
  local p=$!
  wait_http "$port" "$p" "$out/minimal.log"
  load_runs "$round" "$paths" floor "$port" "$p"
  stop "$p"
}

# http_benthos ROUND PATHS SUT CHILDREN: Benthos, http_server -> CHILDREN
# subprocess children of bench/lpecho (length-prefixed frames) ->
# sync_response, pipeline.threads = POOL. One subprocess processor is one
# child that the threads share (Benthos v4 builds processors once, not per
# thread); CHILDREN > 1 are as many subprocess resources, chosen round
# robin by a counter (a mutation and a switch: Benthos has no pool).
http_benthos() {
  local round=$1 paths=$2 sut=$3 children=$4 port i
  port=$(freeport)
  {
    cat <<YAML
http:
  address: 127.0.0.1:$(freeport)
input:
  http_server:
    address: 127.0.0.1:$port
    path: /v1/process
    allowed_verbs: [POST]
pipeline:
  threads: $pool
  processors:
YAML
    if [ "$children" = 1 ]; then
      echo "    - resource: sp0"
    else
      echo "    - mutation: 'meta child = (counter() % $children).string()'"
      echo "    - switch:"
      for i in $(seq 0 $((children - 1))); do
        echo "        - check: '@child == \"$i\"'"
        echo "          processors: [ { resource: sp$i } ]"
      done
    fi
    echo "processor_resources:"
    for i in $(seq 0 $((children - 1))); do
      cat <<YAML
  - label: sp$i
    subprocess:
      name: $bin/lpecho
      codec_send: length_prefixed_uint32_be
      codec_recv: length_prefixed_uint32_be
YAML
    done
    cat <<YAML
output:
  sync_response: {}
logger:
  level: WARN
YAML
  } >"$out/benthos.yaml"
  "$BENTHOS" run "$out/benthos.yaml" >"$out/benthos.log" 2>&1 &
  local p=$!
  wait_http "$port" "$p" "$out/benthos.log"
  load_runs "$round" "$paths" "$sut" "$port" "$p"
  stop "$p"
}

# kafka_run ROUND SUT: a fresh backlog, the system under test, kdrive.
kafka_run() {
  local round=$1 sut=$2 id in outt dlq group p
  id=r$round-$sut-$RANDOM
  in=in-$id outt=out-$id dlq=in-${id}_dlq group=g-$id
  "$bin/kdrive" topics -brokers "$broker" -partitions "$partitions" -create "$in,$outt,$dlq"
  "$bin/kdrive" produce -brokers "$broker" -topic "$in" -n "$records" -keys "$keys"
  local measure_flags=()
  if [ "$sut" = svc ] || [ "$sut" = svc-eos ] || [ "$sut" = svc-b ]; then
    ui_port=$(freeport)
    rm -rf "$out/storage" && mkdir -p "$out/storage"
    if [ "$sut" = svc-eos ]; then
      SVC_KAFKA="${SVC_KAFKA:-}"$'\ndelivery = "exactly_once"' svc_config "$out/svc-kafka.toml" "$out/storage" persistent "$echo_go" kafka "$broker" "$in" "$outt" "$group"
      measure_flags=(-read-committed)
    else
      svc_config "$out/svc-kafka.toml" "$out/storage" persistent "$echo_go" kafka "$broker" "$in" "$outt" "$group"
    fi
    start_svc "$out/svc-kafka.toml" "$out/svc-kafka.log" "$sut"
    p=$pid
  else
    "$bin/kfloor" -brokers "$broker" -in "$in" -out "$outt" -group "$group" -bin "$echo_go" -children "$pool" 2>"$out/kfloor.log" &
    p=$!
  fi
  echo -n "  kafka $sut: "
  if ! "$bin/kdrive" measure -brokers "$broker" -in "$in" -out "$outt" -dlq "$dlq" -group "$group" -pid "$p" -broker-pid "$broker_pid" -n "$records" "${measure_flags[@]}" \
    -label "round=$round path=kafka sut=$sut" | tee -a "$results"; then
    echo "kafka $sut run failed; its log:"; tail -20 "$out/svc-kafka.log" "$out/kfloor.log" 2>/dev/null || true
    exit 1
  fi
  stop "$p"
  # The broker's request counts of the run (bench/kbroker on SIGUSR1).
  kill -USR1 "$broker_pid"
  sleep 0.2
  echo "  broker: $(tail -1 "$out/kbroker.log")"
  "$bin/kdrive" topics -brokers "$broker" -delete "$in,$outt,$dlq"
}

if has kafka; then
  "$bin/kbroker" -addr-file "$out/broker.addr" >/dev/null 2>"$out/kbroker.log" &
  broker_pid=$!
  for _ in $(seq 100); do [ -s "$out/broker.addr" ] && break; sleep 0.05; done
  broker=$(cat "$out/broker.addr")
fi
if has benthos && [ -z "${BENTHOS:-}" ]; then only=${only//benthos/}; fi

# run_one ROUND NAME: one system under test of the round.
run_one() {
  local round=$1
  case $2 in
  kafka-floor) kafka_run "$round" floor ;;
  kafka-svc) kafka_run "$round" svc ;;
  kafka-svc-eos) kafka_run "$round" svc-eos ;;
  kafka-svc-b) kafka_run "$round" svc-b ;;
  http-floor) http_floor "$round" "http8 http32" -persistent -pool-size "$pool" -bin "$echo_go" ;;
  http-svc) http_svc "$round" svc "$out/storage" persistent "$echo_go" "http8 http32" ;;
  http-svc-b) http_svc "$round" svc-b "$out/storage" persistent "$echo_go" "http8 http32" ;;
  http-svc-mem) http_svc "$round" svc-mem "" persistent "$echo_go" "http8 http32" ;;
  http-svc-live) http_svc "$round" svc-live "$out/storage" persistent "$echo_go" "http8 http32" live ;;
  benthos) http_benthos "$round" "http8 http32" benthos "$pool" ;;
  benthos1) http_benthos "$round" "http8 http32" benthos1 1 ;;
  spawn-floor) http_floor "$round" "$spawn_paths" -bin "$cat_bin" ;;
  spawn-svc) http_svc "$round" svc "$out/storage" spawn "$cat_bin" "$spawn_paths" ;;
  esac
}

# Each group's systems run back to back, in reverse order every other
# round, so that neither side always runs first on a machine whose load
# drifts.
groups=()
b_kafka= b_http=
if [ -n "${SVC_B:-}" ]; then b_kafka=" kafka-svc-b" b_http=" http-svc-b"; fi
has kafka && groups+=("kafka-floor kafka-svc kafka-svc-eos$b_kafka")
has http && groups+=("http-floor http-svc http-svc-mem http-svc-live$b_http")
has benthos && groups+=("benthos benthos1")
has spawn && groups+=("spawn-floor spawn-svc")
for round in $(seq "$rounds"); do
  echo "== round $round of $rounds (load average $(cut -d' ' -f1 /proc/loadavg))"
  for g in "${groups[@]}"; do
    order=$g
    if ((round % 2 == 0)); then order=$(echo "$g" | tr ' ' '\n' | tac | tr '\n' ' '); fi
    for name in $order; do run_one "$round" "$name"; done
  done
done

echo
"$bin/speedtable" "$results"
echo "(worker CPU excludes the executor children; raw lines with the children's CPU: $results)"
