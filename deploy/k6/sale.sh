#!/bin/sh
# The k6 service's entrypoint (docker-compose.yml, profile loadtest): creates
# a SKU through the admin API at ADMIN_URL (default: the first of BASE_URLS)
# unless SKU_ID is set, then runs loadtest/sale.js against BASE_URLS. Extra arguments go to
# `k6 run` (docker compose --profile loadtest run --rm k6 --quiet).
#
# Env: BASE_URLS, ADMIN_URL, ADMIN_TOKEN, SKU_ID (optional), STOCK and PER_USER_LIMIT
# for the new SKU, SALE_JS (the script, default /loadtest/sale.js) and
# sale.js's own knobs (RATE, RAMP, HOLD, ...).
# Runs under the image's busybox sh and wget: no curl, no jq.
set -eu

: "${BASE_URLS:?BASE_URLS is required}"
first=${BASE_URLS%%,*}
first=${first%/}
ADMIN_URL=${ADMIN_URL:-$first}
ADMIN_URL=${ADMIN_URL%/}

if [ -z "${SKU_ID:-}" ]; then
	: "${ADMIN_TOKEN:?ADMIN_TOKEN is required to create the SKU (or set SKU_ID)}"
	body=$(printf '{"name":"compose sale %s","stock":%d,"per_user_limit":%d}' \
		"$(date -u +%Y%m%dT%H%M%SZ)" "${STOCK:-20000}" "${PER_USER_LIMIT:-2}")
	resp=$(wget -q -O - \
		--header "Authorization: Bearer $ADMIN_TOKEN" \
		--header 'Content-Type: application/json' \
		--post-data "$body" "$ADMIN_URL/admin/v1/skus") || {
		echo "sale.sh: POST $ADMIN_URL/admin/v1/skus failed (admin token? balancer up?)" >&2
		exit 1
	}
	SKU_ID=$(printf '%s' "$resp" | sed -n 's/.*"id":[[:space:]]*\([0-9][0-9]*\).*/\1/p')
	if [ -z "$SKU_ID" ]; then
		echo "sale.sh: no SKU id in the answer: $resp" >&2
		exit 1
	fi
	echo "sale.sh: created SKU $SKU_ID: stock ${STOCK:-20000}, per-user limit ${PER_USER_LIMIT:-2}"
fi

echo "sale.sh: k6 run loadtest/sale.js, SKU $SKU_ID, against $BASE_URLS"
export SKU_ID
exec k6 run "$@" "${SALE_JS:-/loadtest/sale.js}"
