#!/usr/bin/env bash
# How bench360's client scales with cores: `bench360 selfbench` at STREAMS concurrent streams
# with the scripted server pinned to SERVER_CPUS and the client (its runtime's worker threads)
# pinned to the first 1, 2, 4, … of CLIENT_CPUS. Prints a Markdown table: client cores,
# tokens/s, tokens/s per client core, client CPU per 1000 tokens, in flight held, TTFT and ITL
# error against the server's log.
#
#   scripts/bench-scaling.sh [STREAMS] [SECONDS]
#   env: BENCH360 (binary; default target/release/bench360), SERVER_CPUS (default 0),
#        CLIENT_CPUS (default: every other CPU), COUNTS (default 1 2 4 … up to them all),
#        TOKENS/TTFT_MS/ITL_MS (scripted response; default 128 tokens, 20 ms, 5 ms)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BENCH360:-target/release/bench360}
STREAMS=${1:-1024}
SECONDS_=${2:-10}
SERVER_CPUS=${SERVER_CPUS:-0}
n=$(nproc)
if [ -z "${CLIENT_CPUS:-}" ]; then
  CLIENT_CPUS=$(seq -s, 0 $((n - 1)) | tr ',' '\n' | grep -vxF -f <(tr ',' '\n' <<< "$SERVER_CPUS") | paste -sd,)
fi
[ -n "$CLIENT_CPUS" ] || { echo "no CPU left for the client (SERVER_CPUS=$SERVER_CPUS, $n CPUs)" >&2; exit 2; }
IFS=, read -r -a cpus <<< "$CLIENT_CPUS"
if [ -z "${COUNTS:-}" ]; then
  COUNTS=""; c=1
  while [ "$c" -lt "${#cpus[@]}" ]; do COUNTS="$COUNTS $c"; c=$((c * 2)); done
  COUNTS="$COUNTS ${#cpus[@]}"
fi
echo "| client cores | streams | tokens/s | tokens/s per client core | client CPU cores used | client CPU ms / 1000 tokens | in flight held | TTFT error p50 / p99 ms | ITL error p50 / p99 ms |"
echo "|---|---|---|---|---|---|---|---|---|"
for k in $COUNTS; do
  set_=$(IFS=,; echo "${cpus[*]:0:$k}")
  row=$("$BIN" selfbench --streams "$STREAMS" --seconds "$SECONDS_" --tokens "${TOKENS:-128}" \
        --ttft-ms "${TTFT_MS:-20}" --itl-ms "${ITL_MS:-5}" --plan-nodes 10 --cached-runs 2 \
        --parquet-rows 1000 --server-cpus "$SERVER_CPUS" --client-cpus "$set_" 2>/dev/null \
        | grep -m1 "^| $STREAMS | ")
  # | streams | requests (failed) | in flight | tokens/s | cpu ms/1000 | cores | mem | ttft | itl | delay | setup |
  awk -F'|' -v k="$k" '{
      tps = $5 + 0;
      printf "| %d | %s | %.0f | %.0f | %s | %s | %s | %s | %s |\n", k, $2, tps, tps / k, $7, $6, $4, $9, $10
    }' <<< "$row" | sed 's/  */ /g'
done
