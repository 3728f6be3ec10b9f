#!/usr/bin/env bash
# Installs the system packages the test suite drives (tmux for the --watch screen test,
# Debian's chromium for the dashboard browser test, node's playwright-core to drive it) and
# makes sure PostgreSQL is running. Idempotent: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
if ((${#missing[@]})); then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-system-deps: missing ${missing[*]}; run as root or install them yourself" >&2
    exit 1
  fi
  echo "install-system-deps: installing ${missing[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [ -f tests/browser/package.json ] && [ ! -d tests/browser/node_modules ]; then
  (cd tests/browser && npm install --no-audit --no-fund --silent)
fi

if command -v pg_ctlcluster >/dev/null 2>&1 && ! pg_isready -q -h 127.0.0.1 -p 5432; then
  echo "install-system-deps: starting PostgreSQL" >&2
  pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql)" main start
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
fi
