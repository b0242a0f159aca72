#!/usr/bin/env bash
# Throughput through a ClusterIP vs straight to the pod IP, from the node, with
# wrk (Debian package `wrk`) under a bounded load: CONNS connections for SECS
# seconds against one busybox httpd pod. Needs root, containerd (scripts/install-deps)
# and a built berth (BERTH=target/debug/berth by default). Takes the machine-wide
# node agent lock like the e2e tests. All traffic stays on this machine.
#
#   crates/proxy/bench/throughput.sh            # CONNS=8 SECS=10 THREADS=1
set -euo pipefail
cd "$(dirname "$0")/../../.."
BERTH=${BERTH:-target/debug/berth}
CONNS=${CONNS:-8}
SECS=${SECS:-10}
THREADS=${THREADS:-1}
command -v wrk >/dev/null || { echo "wrk not installed (apt-get install wrk)"; exit 1; }
[ -x "$BERTH" ] || { echo "build berth first (cargo build -p berth)"; exit 1; }

run() {
  D=$(mktemp -d /tmp/berth-proxy-bench-XXXX)
  "$BERTH" server --bind-address 127.0.0.1 --secure-port 0 --insecure-port 0 \
    --data-dir "$D" --disable-ingress > "$D/server.log" 2>&1 &
  PID=$!
  trap 'kubectl delete pods --all --grace-period=1 --wait=true --timeout=30s >/dev/null 2>&1 || true; kill -TERM $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$D"' EXIT
  export KUBECONFIG=$D/kubeconfig.yaml
  for _ in $(seq 120); do
    kubectl get nodes 2>/dev/null | grep -q " Ready" && break; sleep 0.5
  done
  kubectl apply -f - >/dev/null <<Y
apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: httpd
    image: busybox
    command: ["sh", "-c", "mkdir -p /www; echo ok > /www/index.html; exec httpd -f -p 80 -h /www"]
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{port: 80}]
Y
  kubectl wait --for=condition=Ready pod/web --timeout=60s >/dev/null
  POD=$(kubectl get pod web -o jsonpath='{.status.podIP}')
  VIP=$(kubectl get svc web -o jsonpath='{.spec.clusterIP}')
  for _ in $(seq 60); do
    nft list table ip berth-proxy 2>/dev/null | grep -q "dnat to $POD:80" && break; sleep 0.5
  done
  curl -sf "http://$VIP/" >/dev/null || { echo "ClusterIP $VIP not answering"; exit 1; }
  echo "pod $POD, ClusterIP $VIP; wrk -t$THREADS -c$CONNS -d${SECS}s --latency, twice each"
  summary() { # output name
    local out=$1 name=$2
    [ -n "${VERBOSE:-}" ] && echo "$out"
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    p50=$(awk '$1=="50%" {print $2}' <<<"$out")
    p99=$(awk '$1=="99%" {print $2}' <<<"$out")
    errs=$(grep -E "Socket errors|Non-2xx" <<<"$out" | tr -s ' ' || true)
    printf '  %-10s %10s req/s  p50 %8s  p99 %8s  %s\n' "$name" "$rps" "$p50" "$p99" "$errs"
    case $name in podIP) sp=$(awk -v s="$sp" -v r="$rps" 'BEGIN {print s + r}');;
                  *) sc=$(awk -v s="$sc" -v r="$rps" 'BEGIN {print s + r}');; esac
  }
  ratio() { awk -v a="$sc" -v b="$sp" 'BEGIN {printf "  ClusterIP / pod IP throughput: %.2f\n", a / b}'; }

  # From pods: pod traffic is not masqueraded. Each pod runs the host's wrk in
  # its own network namespace (chroot into a hostPath /). The ClusterIP and
  # pod IP runs come from two pods: from one source they would reuse ports
  # whose conntrack entries (TIME_WAIT for 120 s: busybox httpd closes every
  # connection) belong to the other path's flows, and stall on them.
  OUT=$(mktemp -d /tmp/berth-proxy-wrk-XXXX)
  pod_wrk() { # pod-name target-ip
    local cmd="for n in 1 2; do wrk -t$THREADS -c$CONNS -d${SECS}s --latency http://$2/ > $OUT/$1-\$n.txt; done"
    kubectl apply -f - >/dev/null <<Y
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
  - name: wrk
    image: busybox
    command: ["chroot", "/host", "sh", "-c", "$cmd"]
    volumeMounts: [{name: host, mountPath: /host}]
  volumes: [{name: host, hostPath: {path: /}}]
Y
    for _ in $(seq $((SECS * 2 + 60))); do
      [ "$(kubectl get pod "$1" -o jsonpath='{.status.phase}')" = Succeeded ] && break; sleep 1
    done
  }
  echo "from a pod (same node as the backend):"
  pod_wrk wrk-podip "$POD"
  pod_wrk wrk-clusterip "$VIP"
  sp=0; sc=0
  for f in "$OUT"/wrk-podip-*.txt; do summary "$(cat "$f")" podIP; done
  for f in "$OUT"/wrk-clusterip-*.txt; do summary "$(cat "$f")" ClusterIP; done
  ratio
  rm -rf "$OUT"

  # From the node: ClusterIP traffic from outside the pod network is
  # masqueraded (as upstream), so its flows do not share tuples with the
  # direct ones; but masqueraded flows reusing ports stall on the pod's
  # TIME_WAIT (the same happens with a bare nft DNAT + masquerade).
  echo "from the node:"
  sp=0; sc=0
  for n in 1 2; do summary "$(wrk -t"$THREADS" -c"$CONNS" -d"${SECS}s" --latency "http://$POD/")" podIP; done
  for n in 1 2; do summary "$(wrk -t"$THREADS" -c"$CONNS" -d"${SECS}s" --latency "http://$VIP/")" ClusterIP; done
  ratio
}

exec 9>/tmp/berth-node-agent.lock
flock 9
run
