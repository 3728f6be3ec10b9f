#!/usr/bin/env bash
# `make run`: start the control plane on the embedded default (SQLite under .data/, local Ray),
# submit a demo SPB job (the digits CNN, staircase plan over 4 workers), watch it to SUCCEEDED,
# print its final accuracy, then stop the server.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
CLI="$VENV/bin/jigsaw-cli"
PORT=${JIGSAW_PORT:-8765}
export JIGSAW_DATA_DIR=${JIGSAW_DATA_DIR:-$PWD/.data/quickstart}
export JIGSAW_EXECUTOR=${JIGSAW_EXECUTOR:-ray}
export JIGSAW_URL="http://127.0.0.1:$PORT"
mkdir -p "$JIGSAW_DATA_DIR"
log="$JIGSAW_DATA_DIR/server.log"

echo "==> starting the control plane on $JIGSAW_URL (SQLite in $JIGSAW_DATA_DIR, executor: $JIGSAW_EXECUTOR)"
"$CLI" serve --port "$PORT" >"$log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT

for _ in $(seq 1 120); do
  if curl -fsS "$JIGSAW_URL/readyz" >/dev/null 2>&1; then break; fi
  if ! kill -0 $server 2>/dev/null; then
    echo "the server exited; its log follows" >&2; cat "$log" >&2; exit 1
  fi
  sleep 1
done
curl -fsS "$JIGSAW_URL/readyz" >/dev/null || { echo "server not ready; see $log" >&2; exit 1; }

echo "==> submitting the demo SPB job (digits CNN, staircase plan over 4 workers)"
job=$("$CLI" submit --name digits-demo --model digits_cnn --workers 4 --iterations 300 \
  --spb staircase --batch-size 32 --learning-rate 0.05 -o json \
  | "$VENV/bin/python" -c 'import json,sys; print(json.load(sys.stdin)["id"])')
"$CLI" status "$job" --watch

echo "==> final state"
"$CLI" status "$job"
echo "==> final evaluation (held-out digits)"
"$CLI" logs "$job" | grep "finished at" || true
