#!/usr/bin/env bash
# Requests/s and latency through Berth's ingress vs straight to the pod: one
# busybox httpd pod on the real node agent, wrk (Debian's) from the node on its
# own addresses, same run, bounded load (fixed connections and duration).
#
# usage: [ROUNDS=3] crates/ingress/bench/ingress_bench.sh [BERTH_BINARY] [CONNECTIONS] [SECONDS]
# Needs root, the node agent's dependencies (scripts/install-deps) and wrk.
set -euo pipefail
BERTH=${1:-target/debug/berth}
CONNS=${2:-16}
SECS=${3:-10}
HTTP_PORT=${HTTP_PORT:-18080}
HTTPS_PORT=${HTTPS_PORT:-18443}
# One node agent per machine: take the lock the e2e harness takes.
exec 9>"${TMPDIR:-/tmp}/berth-node-agent.lock"
flock 9
DIR=$(mktemp -d /tmp/berth-ingress-bench.XXXXXX)
"$BERTH" server --bind-address 127.0.0.1 --secure-port 0 --insecure-port 0 --data-dir "$DIR" \
  --ingress-http-port "$HTTP_PORT" --ingress-https-port "$HTTPS_PORT" >"$DIR/server.out" 2>"$DIR/server.err" &
SERVER=$!
export KUBECONFIG="$DIR/kubeconfig.yaml"
cleanup() {
  kubectl delete deployment web --wait=true >/dev/null 2>&1 || true
  kubectl delete pods --all --wait=true --timeout=60s >/dev/null 2>&1 || true
  kill -TERM "$SERVER" 2>/dev/null || true
  wait "$SERVER" 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT
for _ in $(seq 1 120); do
  [ "$(kubectl get nodes -o 'jsonpath={.items[0].status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ] && break
  sleep 0.5
done
kubectl apply -f - >/dev/null <<'YAML'
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: berth
  annotations: {ingressclass.kubernetes.io/is-default-class: "true"}
spec:
  controller: berth.dev/ingress
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: httpd
        image: busybox
        command: ["sh", "-c", "mkdir -p /www && echo hello > /www/index.html && exec httpd -f -p 8080 -h /www"]
        ports: [{name: http, containerPort: 8080}]
        # A BestEffort pod's cgroup gets cpu.shares=2: starved by wrk and Berth,
        # it would make both paths' figures depend on whatever else runs.
        resources: {requests: {cpu: "1"}}
        readinessProbe:
          httpGet: {path: /index.html, port: http}
          periodSeconds: 1
---
apiVersion: v1
kind: Service
metadata: {name: web}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http}]
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
kubectl rollout status deployment/web --timeout=120s >/dev/null
POD_IP=$(kubectl get pods -l app=web -o 'jsonpath={.items[0].status.podIP}')
for _ in $(seq 1 60); do
  NODE_IP=$(kubectl get ingress web -o 'jsonpath={.status.loadBalancer.ingress[0].ip}')
  [ -n "$NODE_IP" ] && [ "$(curl -s -o /dev/null -w '%{http_code}' -H 'Host: web.example.com' "http://$NODE_IP:$HTTP_PORT/index.html")" = 200 ] && break
  sleep 0.5
done
. "$(dirname "$0")/compare.sh"
echo "berth: $BERTH, wrk -t2 -c$CONNS -d${SECS}s --latency, ${ROUNDS:-3} alternating rounds, pod $POD_IP, node $NODE_IP"
compare "http://$POD_IP:8080/index.html" "http://$NODE_IP:$HTTP_PORT/index.html" web.example.com
