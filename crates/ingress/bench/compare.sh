# Sourced by the ingress benchmarks: bounded wrk runs (fixed connections and
# duration), direct and through the ingress alternated for $ROUNDS rounds so a
# change in background load hits both paths; prints every run and the median
# of the per-round ratios.
#
# compare DIRECT_URL INGRESS_URL HOST   (needs CONNS, SECS, DIR; ROUNDS default 3;
# FIRST=ingress runs the ingress first in each round). busybox httpd closes every
# connection, and both paths reach the pod from the node's bridge address: a run
# of more connections than the node has ephemeral ports leaves TIME_WAIT state
# that slows the next run whichever path it takes, so compare each path's first
# run on a fresh server (FIRST=direct, then FIRST=ingress) as well as the ratios.
wrk_run() { # label, url, extra wrk args... → one table row; requests/s in $DIR/rps
  local label=$1 url=$2; shift 2
  local out; out=$(wrk -t2 -c"$CONNS" -d"${SECS}s" --latency "$@" "$url")
  local rps p50 p99 errs
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p50=$(awk '$1=="50%" {print $2}' <<<"$out")
  p99=$(awk '$1=="99%" {print $2}' <<<"$out")
  errs=$(awk '/Non-2xx|Socket errors/ {$1=$1; print}' <<<"$out" | paste -sd';' -)
  printf '%-12s %12s %10s %10s  %s\n' "$label" "$rps" "$p50" "$p99" "${errs:-no errors}"
  echo "$rps" >"$DIR/rps"
}

compare() {
  local direct_url=$1 ingress_url=$2 host=$3 d i
  : >"$DIR/ratios"
  printf '%-12s %12s %10s %10s  %s\n' "path" "requests/s" "p50" "p99" "errors"
  for r in $(seq 1 "${ROUNDS:-3}"); do
    if [ "${FIRST:-direct}" = ingress ]; then
      wrk_run "ingress-$r" "$ingress_url" -H "Host: $host"; i=$(cat "$DIR/rps")
      wrk_run "direct-$r" "$direct_url"; d=$(cat "$DIR/rps")
    else
      wrk_run "direct-$r" "$direct_url"; d=$(cat "$DIR/rps")
      wrk_run "ingress-$r" "$ingress_url" -H "Host: $host"; i=$(cat "$DIR/rps")
    fi
    awk -v d="$d" -v i="$i" 'BEGIN {print i/d}' >>"$DIR/ratios"
  done
  sort -g "$DIR/ratios" | awk '{r[NR]=$1} END {printf "ingress/direct throughput per round: "; for (k=1;k<=NR;k++) printf "%.2f ", r[k]; printf "→ median %.2f\n", r[int((NR+1)/2)]}'
}
