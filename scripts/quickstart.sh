#!/usr/bin/env bash
# `make run`: start the control plane on the embedded default (SQLite under .data/, local Ray,
# 4 logical GPUs, the jigsaw policy), then show SPB packing with real training:
#   1. a 4-worker digits CNN ("host", spb auto) takes all 4 GPUs;
#   2. a 1-worker MLP ("guest") arrives: no GPU is free, so jigsaw re-plans the host in place
#      to an SPB staircase and runs the guest in that slack, on the GPU of one of the host's
#      partial workers (a fractional Ray GPU);
#   3. `jigsaw-cli cluster` shows that shared GPU; both jobs train to SUCCEEDED and their
#      held-out accuracy is printed;
#   4. an elastic MLP (1..4 workers, fixed global batch) is sized by goodput from what its
#      leases measure (each resize names its gain), a newcomer arrives, and both reach
#      SUCCEEDED; scripts/watch_jobs.py
#      prints each resize with its reason as it happens and each job's rate at its size, then
#      the resizes and accuracies are printed. The server is stopped at the end.
# The policy options below are the demo's (docs/SCHEDULER.md, "The `make run` demo", says why).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
CLI="$VENV/bin/jigsaw-cli"
PY="$VENV/bin/python"
PORT=${JIGSAW_PORT:-8765}
export JIGSAW_DATA_DIR=${JIGSAW_DATA_DIR:-$PWD/.data/quickstart}
export JIGSAW_EXECUTOR=${JIGSAW_EXECUTOR:-ray}
export JIGSAW_GPUS=${JIGSAW_GPUS:-4}
export JIGSAW_POLICY=${JIGSAW_POLICY:-jigsaw}
# The restart the allocator charges a job before it has measured one (about a gang start on
# local Ray; docs/BENCHMARKS.md, "Elastic resize"): the default 30 s would make a job of the
# demo's length too young to be worth a restart.
export JIGSAW_POLICY_OPTIONS=${JIGSAW_POLICY_OPTIONS:-'{"config": {"restart_s": 10}}'}
export JIGSAW_URL="http://127.0.0.1:$PORT"
# A port in use (another server, an earlier demo) must cost one line and start nothing:
# not the control plane, not Ray. (`serve` refuses such a port too, before it starts them.)
if ! "$PY" -c 'import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))' "$PORT" 2>/dev/null; then
  echo "error: port $PORT is in use; stop what holds it, or run on another port: JIGSAW_PORT=$((PORT + 1)) make run" >&2
  exit 1
fi
mkdir -p "$JIGSAW_DATA_DIR"
log="$JIGSAW_DATA_DIR/server.log"
started=$(date +%s)

echo "==> starting the control plane on $JIGSAW_URL (SQLite in $JIGSAW_DATA_DIR, executor: $JIGSAW_EXECUTOR, $JIGSAW_GPUS GPUs, policy: $JIGSAW_POLICY $JIGSAW_POLICY_OPTIONS)"
# On exit: SIGTERM; the server drains, stops the scheduler and every Ray process it started.
"$CLI" serve --port "$PORT" >"$log" 2>&1 &
server=$!
stop_server() {
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
}
trap stop_server EXIT

for _ in $(seq 1 120); do
  if curl -fsS "$JIGSAW_URL/readyz" >/dev/null 2>&1; then break; fi
  if ! kill -0 $server 2>/dev/null; then
    echo "the server exited; its log follows" >&2; cat "$log" >&2; exit 1
  fi
  sleep 1
done
curl -fsS "$JIGSAW_URL/readyz" >/dev/null || { echo "server not ready; see $log" >&2; exit 1; }

shared_gpu() {  # shared_gpu: succeed once some GPU holds workers of two different jobs
  "$CLI" cluster -o json | "$PY" -c '
import json, sys
def shared(node):
    if isinstance(node, dict):
        workers = node.get("workers")
        if isinstance(workers, list) and len({w.get("job_id") for w in workers}) > 1:
            return True
        return any(shared(v) for v in node.values())
    return isinstance(node, list) and any(shared(v) for v in node)
sys.exit(0 if shared(json.load(sys.stdin)) else 1)'
}
# wait_until SECONDS CONDITION [JOB]: poll (one process, twice a second) until CONDITION holds:
# `running JOB`, `placed JOB` (left PENDING, or a GPU is shared), `resized-or-done JOB`, `idle`.
wait_until() { "$PY" scripts/wait_until.py "$@"; }
final_evaluation() {  # final_evaluation NAME=JOB...: each job's held-out accuracy, by its name
  local pair
  for pair in "$@"; do
    echo "${pair%%=*}: $("$CLI" logs "${pair#*=}" --tail 50 | grep "finished at" | tail -1 || true)"
  done
}

# Jobs left active by an interrupted earlier run (the SQLite database persists) would hold
# the GPUs: cancel them so the demo starts on an idle cluster.
leftover=$("$CLI" list -s PENDING -s ADMITTED -s RUNNING -s PREEMPTED -s RETRYING -o json \
  | "$PY" -c 'import json,sys; d=json.load(sys.stdin); d=d.get("items", d) if isinstance(d,dict) else d; print(" ".join(j["id"] for j in d))')
if [ -n "$leftover" ]; then
  echo "==> cancelling jobs left active by an earlier run: $leftover"
  # shellcheck disable=SC2086
  "$CLI" cancel $leftover >/dev/null
  wait_until 60 idle || { echo "the cluster did not become idle; see $log" >&2; exit 1; }
fi

echo "==> submitting the host: digits CNN on 4 workers, SPB plan chosen by jigsaw"
host=$("$CLI" submit --name digits-host --model digits_cnn --workers 4 --iterations 300 \
  --spb auto --batch-size 32 --learning-rate 0.05 -o json \
  | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["id"])')
wait_until 180 running "$host" || { echo "the host did not start; see $log" >&2; exit 1; }

echo "==> submitting the guest: MLP on 1 worker (no GPU is free: jigsaw looks for SPB slack)"
guest=$("$CLI" submit --name mlp-guest --model mlp --workers 1 --iterations 400 \
  --spb auto --batch-size 32 --learning-rate 0.05 -o json \
  | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["id"])')
wait_until 120 placed "$guest" || true
if shared_gpu; then
  echo "==> the cluster now: one GPU runs the host's partial worker and the guest"
else
  echo "==> no GPU is shared: the allocator priced packing the guest beside the host and did not"
  echo "    take it (a digits CNN worker leaves its GPU almost no idle time to share), so the guest"
  echo "    waits its turn; its queue reason:"
  "$CLI" status "$guest"
fi
"$CLI" cluster
"$CLI" status "$host" "$guest" --watch

echo "==> final state"
"$CLI" status "$host" "$guest"
echo "==> final evaluation (held-out digits)"
final_evaluation digits-host="$host" mlp-guest="$guest"

# The elastic job's length from this machine's speed: about a minute at one worker (the
# guest above trained the same MLP on one worker), so that a fast machine does not finish it
# before a grow can pay (a job seconds old is not worth a restart: on a box where one worker
# ran 1,950 it/s, 20,000 iterations took 12 s and nothing resized), and a slow one does not
# wait for long.
guest_rate=$(final_evaluation mlp-guest="$guest" \
  | "$PY" -c 'import re,sys; m=re.search(r"([0-9.]+) samples/s", sys.stdin.read()); print(m.group(1) if m else 0)')
elastic_iterations=$("$PY" -c 'import sys; print(min(max(round(float(sys.argv[1]) / 48 * 60 / 1000) * 1000, 20000), 150000))' "$guest_rate")
echo "==> elastic: an MLP on 1..4 workers; jigsaw sizes it by goodput, from what its leases measure"
echo "    (the $JIGSAW_GPUS logical GPUs share this machine's $(nproc) CPU cores: here more workers of one job can be slower, not faster;"
echo "    $elastic_iterations iterations, about a minute at one worker, from the guest's $guest_rate samples/s)"
elastic=$("$CLI" submit --name mlp-elastic --model mlp --spb none --workers 2 --min-workers 1 \
  --max-workers 4 --batch-size 24 --iterations "$elastic_iterations" --learning-rate 0.05 -o json \
  | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["id"])')
wait_until 240 resized-or-done "$elastic" || { echo "the elastic job neither resized nor finished; see $log" >&2; exit 1; }
COLUMNS=200 "$CLI" describe "$elastic" | grep -m1 "^Size" || true
echo "==> a 2-worker newcomer arrives"
newcomer=$("$CLI" submit --name mlp-newcomer --model mlp --workers 2 --iterations 400 \
  --spb none --batch-size 32 --learning-rate 0.05 -o json \
  | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["id"])')
# Every change with its reason as it happens (each resize restarts the gang from a checkpoint),
# and each job's rate at its size.
"$PY" scripts/watch_jobs.py "$elastic" "$newcomer"
echo "==> final state"
"$CLI" status "$elastic" "$newcomer"
echo "==> the elastic job's resizes"
COLUMNS=200 "$CLI" describe "$elastic" | "$PY" -c 'import sys
text = sys.stdin.read()
print(text[text.index("Resizes"):text.index("Events")].rstrip())'
echo "==> final evaluation (held-out digits)"
final_evaluation mlp-elastic="$elastic" mlp-newcomer="$newcomer"
echo "==> demo took $(( $(date +%s) - started )) s"
