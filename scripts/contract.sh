#!/usr/bin/env bash
# An independent contract run: the service's quick start (in-process Redis
# and SQLite, nothing else needed) behind Prism's validating proxy, which
# checks every request and answer against handler/openapi.yaml. Requests
# that should succeed must pass with no violation at all; requests made to
# be refused may break the request rules (that is the point) but their
# answers must still match the document. Exits non-zero on any mismatch.
set -euo pipefail

PRISM="@stoplight/prism-cli@5.16.0"
GO="${GO:-go}"
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT

free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }

# wait_for FILE TEXT: until FILE holds TEXT, at most 120 s.
wait_for() {
	for _ in $(seq 1 240); do
		grep -q -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.5
	done
	echo "contract: timed out waiting for '$2' in $1:" >&2
	cat "$1" >&2
	return 1
}

echo "contract: building and starting the quick start"
"$GO" build -o "$work/seckill" "$root/cmd/seckill"
port="$(free_port)"
SECKILL_HTTP_ADDR="127.0.0.1:$port" SECKILL_LOG_LEVEL=warn "$work/seckill" >"$work/out" 2>"$work/err" &
pids+=($!)
wait_for "$work/out" "See the stock as an admin"
admin="$(sed -n 's/^  admin token: //p' "$work/out")"
shopper="$(grep -A1 '^Buy one as u-1' "$work/out" | sed -n "s/.*Authorization: Bearer \([^']*\)'.*/\1/p")"
shopper2="$(grep -A1 '^Buy one as u-2' "$work/out" | sed -n "s/.*Authorization: Bearer \([^']*\)'.*/\1/p")"
[ -n "$admin" ] && [ -n "$shopper" ] && [ -n "$shopper2" ] || { echo "contract: no tokens in the quick start's output" >&2; exit 1; }

pport="$(free_port)"
echo "contract: starting Prism ($PRISM) in front of it"
(cd "$root" && exec npx --yes "$PRISM" proxy handler/openapi.yaml "http://127.0.0.1:$port" -h 127.0.0.1 -p "$pport") >"$work/prism" 2>&1 &
pids+=($!)
wait_for "$work/prism" "Prism is listening"
base="http://127.0.0.1:$pport"

fails=0
# The violations Prism reports (its sl-violations header) that count:
# all of them for KIND ok; those of the answer for KIND refused (a request
# made to be refused breaks the request rules); for KIND yaml those of the
# answer but its body, which Prism cannot parse as YAML.
violations() {
	node -e '
const [kind, raw] = process.argv.slice(1);
const v = raw ? JSON.parse(raw) : [];
const bad = v.filter(x => x.severity === "Error" &&
  (kind === "ok" || (x.location[0] === "response" && !(kind === "yaml" && x.location[1] === "body"))));
if (bad.length) console.log(JSON.stringify(bad));' "$1" "$2"
}

# call WANT_STATUS KIND METHOD PATH [curl args...]
call() {
	local want="$1" kind="$2" method="$3" path="$4"
	shift 4
	local hdrs="$work/h" body="$work/b" status
	status="$(curl -s -o "$body" -D "$hdrs" -w '%{http_code}' -X "$method" "$base$path" "$@")"
	local bad="" v
	v="$(violations "$kind" "$(grep -i '^sl-violations:' "$hdrs" | cut -d' ' -f2- | tr -d '\r' || true)")"
	if [ "$status" != "$want" ]; then
		bad="status $status, want $want: $(head -c 300 "$body")"
	elif [ -n "$v" ]; then
		bad="violations: $v"
	fi
	if [ -n "$bad" ]; then
		echo "FAIL $method $path: $bad"
		fails=$((fails + 1))
	else
		echo "ok   $method $path -> $status"
	fi
	# The last answer's body stays in $work/b for the caller.
}
json='Content-Type: application/json'
A=(-H "Authorization: Bearer $admin")
S=(-H "Authorization: Bearer $shopper")
S2=(-H "Authorization: Bearer $shopper2")

# No HEAD: Prism reads a HEAD answer's (empty) body as the JSON its
# Content-Type names and fails; handler/shape_test.go checks HEAD.
call 200 ok GET /healthz
call 200 ok GET /readyz
call 200 yaml GET /openapi.yaml
call 200 ok GET /metrics

call 201 ok POST /admin/v1/skus "${A[@]}" -H "$json" -d '{"name":"contract","stock":5,"per_user_limit":2}'
sku="$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).id)' "$work/b")"
call 200 ok GET /admin/v1/skus "${A[@]}"
call 200 ok GET "/admin/v1/skus/$sku" "${A[@]}"
call 200 ok PATCH "/admin/v1/skus/$sku" "${A[@]}" -H "$json" -d '{"name":"contract 2"}'
call 200 ok PUT "/admin/v1/skus/$sku/stock" "${A[@]}" -H "$json" -d '{"stock":6}'
call 401 refused GET /admin/v1/skus
call 404 ok GET /admin/v1/skus/999999 "${A[@]}"
call 400 refused POST /admin/v1/skus "${A[@]}" -H "$json" -d '{"name":"","stock":1}'

call 200 ok GET /api/v1/skus
call 200 ok GET "/api/v1/skus?limit=1"
call 200 ok GET "/api/v1/skus/$sku"
call 404 ok GET /api/v1/skus/999999
call 400 refused GET "/api/v1/skus?limit=0"

call 201 ok POST /api/v1/orders "${S[@]}" -H "$json" -H 'Idempotency-Key: contract-1' -d "{\"sku_id\":$sku,\"quantity\":1}"
order="$(node -e 'console.log(JSON.parse(require("fs").readFileSync(process.argv[1])).order_id)' "$work/b")"
call 200 ok POST /api/v1/orders "${S[@]}" -H "$json" -H 'Idempotency-Key: contract-1' -d "{\"sku_id\":$sku,\"quantity\":1}"
call 409 ok POST /api/v1/orders "${S[@]}" -H "$json" -d "{\"sku_id\":$sku,\"quantity\":2}"
call 401 refused POST /api/v1/orders -H "$json" -d "{\"sku_id\":$sku,\"quantity\":1}"
call 404 ok POST /api/v1/orders "${S[@]}" -H "$json" -d '{"sku_id":999999,"quantity":1}'
call 200 ok GET "/api/v1/orders/$order" "${S[@]}"
call 404 ok GET "/api/v1/orders/$order" "${S2[@]}"
call 200 ok GET /api/v1/orders "${S[@]}"
call 200 ok GET "/admin/v1/skus/$sku/orders" "${A[@]}"
call 200 ok POST "/api/v1/orders/$order/cancel" "${S[@]}"
call 401 refused POST "/internal/v1/orders/$order/paid"

if [ "$fails" -ne 0 ]; then
	echo "contract: $fails answer(s) broke handler/openapi.yaml" >&2
	exit 1
fi
echo "contract: every answer matched handler/openapi.yaml"
