#!/usr/bin/env bash
# One order saga end to end through `saga serve`, with nothing but curl (docs/http.md): start it,
# send the same request again (the same answer, replayed), send the same cart under another key
# (409: the intent is taken), wait for the saga's outcome, and try to cancel the ended saga (409).
# A worker must be running on the server's task queue for the saga to end.
#
#   SAGA_API_TOKEN=<a token of SAGA_SERVE_TOKENS> bash docs/examples/http-walkthrough.sh
#
# SAGA_API_URL: the server (default http://127.0.0.1:8236). Exits 0 only if every answer is the
# expected one.
set -euo pipefail
api="${SAGA_API_URL:-http://127.0.0.1:8236}"
token="${SAGA_API_TOKEN:?set SAGA_API_TOKEN to one of the tokens in SAGA_SERVE_TOKENS}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A cart of its own (a new intent), and an idempotency key of its own.
run="$(date +%s)-$RANDOM"
order='{"customer":"walkthrough-'"$run"'","items":[{"sku":"widget","quantity":1,"priceCents":500}],"payment":{"card":"4242424242424242"}}'
key="walkthrough-$run"

# call METHOD PATH [IDEMPOTENCY-KEY [BODY]]: prints the status; headers and body are left in $work.
call() {
  local args=(-sS -X "$1" "$api$2" -H "Authorization: Bearer $token" -D "$work/headers" -o "$work/body" -w '%{http_code}')
  [ -n "${3:-}" ] && args+=(-H "Idempotency-Key: $3")
  [ -n "${4:-}" ] && args+=(-H 'Content-Type: application/json' --data "$4")
  curl "${args[@]}"
}
header() { grep -i "^$1:" "$work/headers" | head -n 1 | cut -d' ' -f2- | tr -d '\r'; }
expect() {
  if [ "$2" != "$3" ]; then
    echo "walkthrough: $1: expected $3, got $2: $(cat "$work/body")" >&2
    exit 1
  fi
}

status=$(call POST /v1/sagas/order "$key" "$order")
expect 'start' "$status" 201
saga=$(header location)
echo "POST /v1/sagas/order (Idempotency-Key: $key): $status Created, Location: $saga"

status=$(call POST /v1/sagas/order "$key" "$order")
expect 'the same request again' "$status" 201
echo "the same request again: $status, Idempotent-Replayed: $(header idempotent-replayed)"

status=$(call POST /v1/sagas/order "$key-2" "$order")
expect 'the same cart under another key' "$status" 409
echo "the same cart under another key: $status $(grep -o '"type":"[^"]*"' "$work/body")"

for _ in $(seq 1 120); do
  status=$(call GET "$saga")
  expect 'the saga' "$status" 200
  outcome=$(grep -o '"outcome":"[A-Z_]*"' "$work/body" || true)
  [ -n "$outcome" ] && break
  sleep 0.5
done
[ -n "$outcome" ] || { echo "walkthrough: the saga did not end within 60 s: $(cat "$work/body")" >&2; exit 1; }
echo "GET $saga: $outcome"

status=$(call POST "$saga/cancel")
expect 'cancel of the ended saga' "$status" 409
echo "POST $saga/cancel: $status $(grep -o '"type":"[^"]*"' "$work/body")"
