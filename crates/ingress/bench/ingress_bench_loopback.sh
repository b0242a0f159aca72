#!/usr/bin/env bash
# Requests/s and latency through Berth's ingress vs straight to the backend on
# loopback: busybox httpd on 127.0.0.1 behind a selector-less Service and an
# EndpointSlice, no node agent; wrk (Debian's), same run, bounded load.
#
# usage: [ROUNDS=3] crates/ingress/bench/ingress_bench_loopback.sh [BERTH_BINARY] [CONNECTIONS] [SECONDS]
set -euo pipefail
BERTH=${1:-target/debug/berth}
CONNS=${2:-16}
SECS=${3:-10}
HTTP_PORT=${HTTP_PORT:-28080}
HTTPS_PORT=${HTTPS_PORT:-28443}
BACKEND_PORT=${BACKEND_PORT:-29090}
DIR=$(mktemp -d /tmp/berth-ingress-bench.XXXXXX)
mkdir -p "$DIR/www" && echo hello >"$DIR/www/index.html"
busybox httpd -f -p "127.0.0.1:$BACKEND_PORT" -h "$DIR/www" &
HTTPD=$!
"$BERTH" server --bind-address 127.0.0.1 --secure-port 0 --insecure-port 0 --data-dir "$DIR/data" \
  --disable-agent --ingress-http-port "$HTTP_PORT" --ingress-https-port "$HTTPS_PORT" >"$DIR/server.out" 2>"$DIR/server.err" &
SERVER=$!
cleanup() {
  kill "$HTTPD" 2>/dev/null || true
  kill -TERM "$SERVER" 2>/dev/null || true
  wait "$SERVER" 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT
export KUBECONFIG="$DIR/data/kubeconfig.yaml"
for _ in $(seq 1 60); do [ -f "$KUBECONFIG" ] && kubectl get ns default >/dev/null 2>&1 && break; sleep 0.5; done
kubectl apply -f - >/dev/null <<YAML
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: berth
  annotations: {ingressclass.kubernetes.io/is-default-class: "true"}
spec:
  controller: berth.dev/ingress
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-1
  labels: {kubernetes.io/service-name: web}
addressType: IPv4
ports: [{name: http, port: $BACKEND_PORT, protocol: TCP}]
endpoints: [{addresses: ["127.0.0.1"], conditions: {ready: true}}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web}
spec:
  rules:
  - host: web.example.com
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
YAML
for _ in $(seq 1 60); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: web.example.com' "http://127.0.0.1:$HTTP_PORT/index.html")" = 200 ] && break
  sleep 0.5
done
. "$(dirname "$0")/compare.sh"
echo "berth: $BERTH, wrk -t2 -c$CONNS -d${SECS}s --latency, ${ROUNDS:-3} alternating rounds, backend busybox httpd on 127.0.0.1:$BACKEND_PORT"
compare "http://127.0.0.1:$BACKEND_PORT/index.html" "http://127.0.0.1:$HTTP_PORT/index.html" web.example.com
