#!/usr/bin/env bash
# bench360 side by side with AIPerf and GuideLLM (issue #18): the same scripted streaming
# server (`bench360 selfbench --serve`, pinned to SERVER_CPUS), each client pinned to
# CLIENT_CPUS, at each stream count in STREAMS, RUNS times; the median of the runs as a
# Markdown table on stdout and in OUT.
#
#   scripts/bench-peers.sh                 install the peers if needed, run everything
#   scripts/bench-peers.sh --install-only  only install (or check) the peers' environments
#
# Environment (defaults in brackets):
#   BENCH360         the bench360 binary [target/release/bench360]
#   BENCH360_HOME    cache root [~/.cache/bench360]; the peers live in $BENCH360_HOME/peers
#   RUNS [3]  STREAMS ["64 256"]  SECONDS_PER_RUN [20]  CLIENTS ["bench360 aiperf guidellm"]
#   TOKENS [128]  TTFT_MS [20]  ITL_MS [5]   the server's script: TOKENS content events, the
#                    first TTFT_MS after the request arrived, then one every ITL_MS (at 2 ms the
#                    server on one core falls behind at 256 streams)
#   SERVER_CPUS [0]  CLIENT_CPUS [1]   taskset CPU lists
#   OUT [docs/results/bench-peers.md]  PEER_PYTHON [python3.11]
#
# The peers are installed from PyPI only, each into its own virtual environment
# $BENCH360_HOME/peers/<name>-<sha256 of its requirements file>, with
#   pip install --no-deps --require-hashes --only-binary :all: -r scripts/requirements-<name>.txt
# (every wheel of the whole tree pinned by version and sha256; regenerate the files with
# scripts/peers/lock.py). An environment that finished installing is reused as it is.
# Nothing but 127.0.0.1 is contacted while benchmarking; the Hugging Face libraries are kept
# offline and the peers get a tiny local tokenizer (scripts/peers/make_tokenizer.py) instead of
# a model's from the hub (the scripted server ignores the prompt anyway).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HELPERS=$ROOT/scripts/peers
BENCH360=${BENCH360:-$ROOT/target/release/bench360}
HOME360=${BENCH360_HOME:-$HOME/.cache/bench360}
PEERS_DIR=$HOME360/peers
RUNS=${RUNS:-3}
STREAMS=${STREAMS:-"64 256"}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-20}
CLIENTS=${CLIENTS:-"bench360 aiperf guidellm"}
TOKENS=${TOKENS:-128}
TTFT_MS=${TTFT_MS:-20}
ITL_MS=${ITL_MS:-5}
SERVER_CPUS=${SERVER_CPUS:-0}
CLIENT_CPUS=${CLIENT_CPUS:-1}
OUT=${OUT:-$ROOT/docs/results/bench-peers.md}
PEER_PYTHON=${PEER_PYTHON:-}
PROMPT_TOKENS=8 # what the scripted server reports as usage.prompt_tokens

log() { printf 'bench-peers: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# render_report RUNDIR: the Markdown report of a finished run (its meta.sh and results.jsonl)
# to OUT and stdout
render_report() {
  local RESULTS=$1/results.jsonl TABLE
  # shellcheck disable=SC1091
  source "$1/meta.sh"
  TABLE=$(python3 "$HELPERS/peers.py" table "$RESULTS")
  mkdir -p "$(dirname "$OUT")"
  {
    cat <<EOF
# bench360, AIPerf and GuideLLM against the same scripted server

$DATE, ${CPU:-unknown CPU} ($NPROC cores), Linux $KERNEL, load average $LOAD0 before and $LOAD1 after; repository at $COMMIT, \`$BENCH360\`; $VERSIONS (CPython $PYVER); $MINUTES min.

\`\`\`sh
$CMD
\`\`\`

Scripted server: \`bench360 selfbench --serve\` on CPU $SERVER_CPUS: $TOKENS tokens per response, one token per event, the first $TTFT_MS ms after the request arrived, then one every $ITL_MS ms; a new connection per request. Every client on CPU $CLIENT_CPUS, at $(tr ' ' '/' <<<"$STREAMS") concurrent streams, ~$SECONDS_PER_RUN s of load per run; each cell is the median of $RUNS runs (each column separately).

$TABLE

- *tok/s per client core*: tokens streamed per second of the client's CPU time (user + system of all its processes), i.e. what one core running nothing but the client would stream; *client CPU ms / 1000 tokens* is the same number inverted. *Streamed tok/s* is what the client actually got on its core.
- *in flight held*: the mean number of requests the server had open (arrived, not yet finished), time-weighted, from the server's own log$( [ "$HAS_SERVE_LOG" = 1 ] || printf ' (this binary wrote none: from the clients'"'"' per-request start and end, marked "(client)")' ). The target is the stream count.
- *TTFT error*: the client's own per-request time to first token − $TTFT_MS ms (the schedule), successful requests; it includes connection setup, the server's lateness and anything the client adds.
- AIPerf and GuideLLM (\`scripts/bench-peers.sh\`): the server's log gives the window, the middle 80 % of its activity (the steady state, without the clients' start and their cut-off at the deadline); tokens are the content events the server sent inside it; the client's CPU time inside it comes from sampling all its processes in /proc every 0.1 s (startup, dataset generation and report writing are not counted). TTFT from AIPerf's \`profile_export.jsonl\` (\`time_to_first_token\`) and GuideLLM's JSON report (\`time_to_first_token_ms\` of each successful request). AIPerf: \`--endpoint-type chat --streaming --use-server-token-count --concurrency C --benchmark-duration S\`; GuideLLM: \`--profile kind=concurrent --constraint kind=max_duration\` with synthetic 8-token prompts; both with a tiny local tokenizer instead of a model's (the server ignores the prompt).
- bench360: \`bench360 selfbench --streams ... --server-cpus $SERVER_CPUS --client-cpus $CLIENT_CPUS\` (its own server process, the same code): its table's tokens/s, client CPU per 1000 tokens (\`getrusage\` over the whole run), in flight held (server log, middle 80 %) and "TTFT − scheduled".
- Why one token every 5 ms by default: at 2 ms (~96k events/s and ~930 new connections/s at 256 streams) the server on one core fell behind its script (bench360's "TTFT − scheduled" p99 ~390 ms at 256 streams), so the row would have measured the server.
- Per-run numbers and every client's output: \`\$BENCH360_HOME/peers/runs/\`.
EOF
  } >"$OUT"
  cat "$OUT"
  log "wrote $OUT (per-run results: $RESULTS)"
}

INSTALL_ONLY=0
case "${1:-}" in
  --install-only) INSTALL_ONLY=1 ;;
  --report)
    [ -f "${2:-}/meta.sh" ] || die "--report RUNDIR: no meta.sh in ${2:-}"
    render_report "$2"; exit 0 ;;
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  "") ;;
  *) die "unknown argument $1 (see --help)" ;;
esac

# ------------------------------------------------------------------------------- cleanup
SERVER_PID="" PEER_PID="" SAMPLER_PID=""
kill_session() { # every process of session $1 (a peer started with setsid), by pid
  local sid=$1 pid stat
  for stat in /proc/[0-9]*/stat; do
    pid=${stat#/proc/}; pid=${pid%/stat}
    [ "$(awk '{sub(/.*\) /, ""); print $4}' "$stat" 2>/dev/null)" = "$sid" ] && { kill -TERM "$pid" 2>/dev/null || true; }
  done
  return 0
}
cleanup() {
  [ -n "$PEER_PID" ] && { kill_session "$PEER_PID"; sleep 0.5; kill -KILL -- "-$PEER_PID" 2>/dev/null || true; }
  [ -n "$SAMPLER_PID" ] && { kill "$SAMPLER_PID" 2>/dev/null || true; }
  [ -n "$SERVER_PID" ] && { kill "$SERVER_PID" 2>/dev/null || true; }
  SERVER_PID="" PEER_PID="" SAMPLER_PID=""
  return 0
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM

# ------------------------------------------------------------------------------- install
pick_python() {
  local c
  for c in "$PEER_PYTHON" python3.11 "$HOME"/.pyenv/versions/3.11*/bin/python3 python3; do
    [ -n "$c" ] && command -v "$c" >/dev/null 2>&1 || continue
    if [ "$("$c" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" = 3.11 ]; then
      command -v "$c"; return 0
    fi
  done
  die "no CPython 3.11 found (the pinned wheels are cp311): set PEER_PYTHON"
}

# install_peer NAME -> prints the environment's directory
install_peer() {
  local name=$1 req=$ROOT/scripts/requirements-$1.txt hash dir py t0
  [ -f "$req" ] || die "missing $req"
  hash=$(sha256sum "$req" | cut -c1-16)
  dir=$PEERS_DIR/$name-$hash
  if [ -f "$dir/.installed" ] && [ -x "$dir/bin/$name" ]; then
    echo "$dir"; return 0
  fi
  py=$(pick_python)
  log "installing $name into $dir (pinned wheels from PyPI, $(grep -c '^[a-z0-9]' "$req") packages)"
  t0=$(date +%s)
  rm -rf "$dir"
  "$py" -m venv "$dir"
  "$dir/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
    --require-hashes --only-binary :all: -r "$req" >&2
  "$dir/bin/python" -m pip check --disable-pip-version-check >&2 || die "$name: pip check failed"
  "$dir/bin/$name" --version >&2
  cp "$req" "$dir/requirements.txt"
  touch "$dir/.installed"
  log "$name installed in $(( $(date +%s) - t0 )) s, $(du -sh "$dir" | cut -f1)"
  echo "$dir"
}

mkdir -p "$PEERS_DIR"
exec 9>"$PEERS_DIR/.install.lock"
flock 9
declare -A ENV_DIR=()
for c in $CLIENTS; do
  case $c in
    aiperf | guidellm) ENV_DIR[$c]=$(install_peer "$c") ;;
    bench360) ;;
    *) die "unknown client $c" ;;
  esac
done
# A tiny local tokenizer, keyed by the script that makes it.
TOKENIZER=""
if [ ${#ENV_DIR[@]} -gt 0 ]; then
  TOKENIZER=$PEERS_DIR/tokenizer-$(sha256sum "$HELPERS/make_tokenizer.py" | cut -c1-16)
  if [ ! -f "$TOKENIZER/tokenizer.json" ]; then
    for c in "${!ENV_DIR[@]}"; do any=${ENV_DIR[$c]}; break; done
    HF_HUB_OFFLINE=1 "$any/bin/python" "$HELPERS/make_tokenizer.py" "$TOKENIZER.tmp"
    rm -rf "$TOKENIZER"; mv "$TOKENIZER.tmp" "$TOKENIZER"
  fi
fi
flock -u 9
if [ "$INSTALL_ONLY" = 1 ]; then
  for c in "${!ENV_DIR[@]}"; do echo "$c: ${ENV_DIR[$c]}"; done
  exit 0
fi

# ------------------------------------------------------------------------------- checks
[ -x "$BENCH360" ] || die "no bench360 binary at $BENCH360 (cargo build --release, or set BENCH360)"
BENCH360=$(realpath "$BENCH360")
command -v taskset >/dev/null || die "taskset (util-linux) is needed"
HELP=$("$BENCH360" selfbench --help)
HAS_SERVE_LOG=0; grep -q -- '--serve-log' <<<"$HELP" && HAS_SERVE_LOG=1
HAS_PINS=0; grep -q -- '--server-cpus' <<<"$HELP" && HAS_PINS=1
[ "$HAS_SERVE_LOG" = 1 ] || log "this bench360 has no --serve-log: in flight held comes from the clients' own records"

WORK=$PEERS_DIR/runs/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$WORK"
RESULTS=$WORK/results.jsonl
: >"$RESULTS"
LIMIT=$((SECONDS_PER_RUN + 240)) # per client process: startup, load, grace, report

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_server PORT LOGFILE
start_server() {
  local port=$1 slog=$2 i
  local args=(selfbench --serve "$port" --tokens "$TOKENS" --ttft-ms "$TTFT_MS" --itl-ms "$ITL_MS")
  [ "$HAS_SERVE_LOG" = 1 ] && args+=(--serve-log "$slog")
  taskset -c "$SERVER_CPUS" "$BENCH360" "${args[@]}" >"${slog%.log}.out" 2>&1 &
  SERVER_PID=$!
  for i in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || die "scripted server exited: $(cat "${slog%.log}.out")"
    sleep 0.1
  done
  die "scripted server did not listen on $port"
}

# Does the server's stream carry "object": "chat.completion.chunk"? AIPerf's chat parser
# ignores chunks without it (every request then fails as "no content"); real OpenAI-compatible
# servers send it.
probe_object_field() {
  local port dir=$WORK/probe rc=0
  mkdir -p "$dir"
  port=$(free_port)
  start_server "$port" "$dir/server.log"
  python3 - "$port" <<'PY' || rc=$?
import sys, urllib.request
req = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/v1/chat/completions",
                             data=b'{"stream": true}', headers={"content-type": "application/json"})
body = urllib.request.urlopen(req, timeout=30).read().decode()
chunks = [l for l in body.splitlines() if l.startswith("data: {")]
sys.exit(0 if chunks and all('"object"' in c for c in chunks) else 3)
PY
  kill "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
  return $rc
}

# HF libraries: no hub, no telemetry; everything local.
export HF_HUB_DISABLE_TELEMETRY=1 HF_DATASETS_OFFLINE=1 DO_NOT_TRACK=1 NO_COLOR=1 TOKENIZERS_PARALLELISM=false

peer_command() { # CLIENT STREAMS PORT DIR -> the command in PEER_CMD
  local client=$1 streams=$2 port=$3 dir=$4
  case $client in
    aiperf)
      # AIPerf's offline mode (HF_HUB_OFFLINE) only looks in the hub cache and rejects a
      # local folder; without it a local path is loaded directly, without the network.
      PEER_CMD=(env -u HF_HUB_OFFLINE -u TRANSFORMERS_OFFLINE
        "${ENV_DIR[aiperf]}/bin/aiperf" profile
        --model scripted --url "http://127.0.0.1:$port" --endpoint-type chat --streaming
        --tokenizer "$TOKENIZER" --use-server-token-count
        --isl "$PROMPT_TOKENS" --osl "$TOKENS" --random-seed 1
        --concurrency "$streams" --benchmark-duration "$SECONDS_PER_RUN" --benchmark-grace-period 30
        --ui-type none --no-server-metrics --no-gpu-telemetry
        --artifact-dir "$dir/out") ;;
    guidellm)
      PEER_CMD=(env HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
        "${ENV_DIR[guidellm]}/bin/guidellm" run
        --backend "kind=openai_http,target=http://127.0.0.1:$port,model=scripted,validate_backend=false"
        --profile "kind=concurrent,streams=$streams"
        --constraint "kind=max_duration,seconds=$SECONDS_PER_RUN"
        --tokenizer "kind=huggingface_auto,model=$TOKENIZER"
        --data "kind=synthetic_text,prompt_tokens=$PROMPT_TOKENS,output_tokens=$TOKENS"
        --output "kind=json,path=$dir/benchmarks.json"
        --disable-progress) ;;
  esac
}

run_peer() { # CLIENT STREAMS RUN
  local client=$1 streams=$2 run=$3 dir port rc=0
  dir=$WORK/$client-c$streams-r$run
  mkdir -p "$dir"
  port=$(free_port)
  start_server "$port" "$dir/server.log"
  peer_command "$client" "$streams" "$port" "$dir"
  printf '%q ' "${PEER_CMD[@]}" >"$dir/command.txt"
  log "run $run: $client, $streams streams, ~$SECONDS_PER_RUN s (log: $dir/client.out)"
  (cd "$dir" && exec setsid taskset -c "$CLIENT_CPUS" timeout -k 10 "$LIMIT" "${PEER_CMD[@]}") \
    >"$dir/client.out" 2>&1 &
  PEER_PID=$!
  taskset -c "$SERVER_CPUS" nice -n 10 python3 "$HELPERS/peers.py" sample "$PEER_PID" "$dir/cpu.txt" &
  SAMPLER_PID=$!
  wait "$PEER_PID" || rc=$?
  wait "$SAMPLER_PID" || true
  kill_session "$PEER_PID"
  PEER_PID="" SAMPLER_PID=""
  kill "$SERVER_PID" 2>/dev/null || true
  wait "$SERVER_PID" 2>/dev/null || true
  SERVER_PID=""
  [ "$rc" = 0 ] || log "$client exited with $rc (see $dir/client.out)"
  python3 "$HELPERS/peers.py" measure "$client" "$dir" "$streams" "$TOKENS" "$TTFT_MS" "$ITL_MS" \
    "$dir/server.log" "$dir/cpu.txt" | tee -a "$RESULTS" >&2
}

run_bench360() { # RUN
  local run=$1 dir args
  dir=$WORK/bench360-r$run
  mkdir -p "$dir"
  args=(selfbench --streams "$(tr ' ' ',' <<<"$STREAMS")" --seconds "$SECONDS_PER_RUN"
    --tokens "$TOKENS" --ttft-ms "$TTFT_MS" --itl-ms "$ITL_MS"
    --plan-nodes 10 --cached-runs 2 --parquet-rows 1000)
  log "run $run: bench360, $STREAMS streams, ~$SECONDS_PER_RUN s each"
  if [ "$HAS_PINS" = 1 ]; then
    (cd "$dir" && timeout -k 10 "$((LIMIT * 2))" "$BENCH360" "${args[@]}" \
      --server-cpus "$SERVER_CPUS" --client-cpus "$CLIENT_CPUS") >"$dir/selfbench.md" 2>"$dir/selfbench.err"
  else
    # An older bench360: its server is its child and inherits the client's pin.
    log "this bench360 has no --server-cpus: server and client share CPUs $CLIENT_CPUS"
    (cd "$dir" && timeout -k 10 "$((LIMIT * 2))" taskset -c "$CLIENT_CPUS" "$BENCH360" "${args[@]}") \
      >"$dir/selfbench.md" 2>"$dir/selfbench.err"
  fi
  python3 "$HELPERS/peers.py" selfbench "$dir/selfbench.md" | tee -a "$RESULTS" >&2
}

# ------------------------------------------------------------------------------- run
T0=$(date +%s)
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)
SKIP_AIPERF=0
if [[ " $CLIENTS " == *" aiperf "* ]] && ! probe_object_field; then
  SKIP_AIPERF=1
  log 'this server'"'"'s chunks lack "object": "chat.completion.chunk": AIPerf would reject every one, not running it'
  for s in $STREAMS; do
    python3 "$HELPERS/peers.py" skip aiperf "$s" 'not run: the scripted server'"'"'s chunks lack "object": "chat.completion.chunk", without which AIPerf'"'"'s chat parser finds no content in them (every request fails)' >>"$RESULTS"
  done
fi
for run in $(seq "$RUNS"); do # interleaved, so that drift hits every client alike
  for c in $CLIENTS; do
    if [ "$c" = aiperf ] && [ "$SKIP_AIPERF" = 1 ]; then
      continue
    elif [ "$c" = bench360 ]; then
      run_bench360 "$run"
    else
      for s in $STREAMS; do run_peer "$c" "$s" "$run"; done
    fi
  done
done

# ------------------------------------------------------------------------------- report
version_of() {
  case $1 in
    bench360) "$BENCH360" --version | awk '{print $2}' ;;
    *) "${ENV_DIR[$1]}/bin/python" -c "import importlib.metadata as m; print(m.version('$1'))" ;;
  esac
}
VERSIONS=""
for c in $CLIENTS; do VERSIONS+="${VERSIONS:+, }$c $(version_of "$c")"; done
COMMIT=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
CPU=$(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo)
NPROC=$(nproc) KERNEL=$(uname -r) DATE=$(date -u +%Y-%m-%d) LOAD1=$(cut -d' ' -f1-3 /proc/loadavg)
PYVER=$("$(pick_python)" -c 'import platform; print(platform.python_version())')
MINUTES=$((($(date +%s) - T0) / 60))
CMD=""
[ "$BENCH360" = "$(realpath -m "$ROOT/target/release/bench360")" ] || CMD="BENCH360=$BENCH360 "
CMD+="RUNS=$RUNS STREAMS=\"$STREAMS\" SECONDS_PER_RUN=$SECONDS_PER_RUN TOKENS=$TOKENS TTFT_MS=$TTFT_MS ITL_MS=$ITL_MS SERVER_CPUS=$SERVER_CPUS CLIENT_CPUS=$CLIENT_CPUS scripts/bench-peers.sh"
declare -p DATE CPU NPROC KERNEL LOAD0 LOAD1 COMMIT BENCH360 VERSIONS PYVER MINUTES CMD RUNS STREAMS \
  SECONDS_PER_RUN TOKENS TTFT_MS ITL_MS SERVER_CPUS CLIENT_CPUS HAS_SERVE_LOG >"$WORK/meta.sh"
render_report "$WORK"
