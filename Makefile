# One Makefile mirrors CI: .ci/run calls `make test`.
GO      ?= go
GOBIN   := $(shell $(GO) env GOBIN)
ifeq ($(GOBIN),)
GOBIN   := $(shell $(GO) env GOPATH)/bin
endif
export PATH := $(GOBIN):$(PATH)

.PHONY: run test deps test-only lint bench loadtest build

# The lock library and its ZooKeeper client are Go modules of their own.
LOCK_MODULES := lock lock/zookeeper
STATICCHECK  := honnef.co/go/tools/cmd/staticcheck@v0.8.2

## run: the service on its embedded default (in-process Redis and SQLite)
run:
	$(GO) run ./cmd/seckill

## build: the binary in bin/
build:
	$(GO) build -o bin/seckill ./cmd/seckill

## test: install MariaDB, Redis, ZooKeeper and k6 when missing (saying so first), then the whole
##       suite with -race (one ZooKeeper test without it: app/zookeeper_leader_test.go says
##       why) against a throwaway MariaDB and Redis of its own, deleted after; no other server is
##       touched. SECKILL_TEST_MYSQL_DSN / SECKILL_TEST_REDIS_ADDR use an existing server instead.
test: deps
	./scripts/with-test-servers.sh $(MAKE) --no-print-directory test-only

## test-only: the suite against SECKILL_TEST_MYSQL_DSN and SECKILL_TEST_REDIS_ADDR
##            (default root@tcp(127.0.0.1:3306)/ and 127.0.0.1:6379), nothing installed or started
##            then the lock's modules (lock, lock/zookeeper: `go test ./...` at the root does not reach
##            them) and scripts/lock-alone.sh: a module outside the repository takes the lock alone
test-only:
	GO=$(GO) ./scripts/go-test.sh -race -count=1 -timeout 30m ./...
	GO=$(GO) ./scripts/go-test.sh -count=1 -timeout 10m -run '^TestThreeInstancesOnZooKeeperSellExactlyTheStockWhenTheLeaderDies$$' ./app
	for m in $(LOCK_MODULES); do GO="$(GO) -C $$m" ./scripts/go-test.sh -race -count=1 -timeout 15m ./... || exit 1; done
	GO=$(GO) ./scripts/lock-alone.sh

deps:
	./scripts/deps.sh

## lint: go vet and staticcheck (the root and the lock's modules), promtool on the alert rules
##       (check config, check rules, test rules; scripts/deps.sh fetches promtool), Spectral's spectral:oas
##       rules (no warning) and Redocly's recommended rules on handler/openapi.yaml, and the contract run:
##       the quick start behind Prism's validating proxy, every answer checked against the document
##       (scripts/contract.sh; npm fetches Redocly and Prism)
lint:
	$(GO) vet ./...
	for m in $(LOCK_MODULES); do $(GO) -C $$m vet ./... || exit 1; done
	$(GO) run $(STATICCHECK) ./...
	for m in $(LOCK_MODULES); do $(GO) -C $$m run $(STATICCHECK) ./... || exit 1; done
	./scripts/deps.sh promtool
	promtool check config deploy/prometheus/prometheus.yml
	promtool check rules deploy/prometheus/alerts.yml
	promtool test rules deploy/prometheus/alerts_test.yml
	npx --yes @redocly/cli@2.77.0 lint --config redocly.yaml handler/openapi.yaml
	npx --yes @stoplight/spectral-cli@6.16.3 lint --ruleset .spectral.yaml --fail-severity warn handler/openapi.yaml
	GO=$(GO) ./scripts/contract.sh

## bench: the service and the comparison designs (bench/compare) through HTTP with k6 next to the HTTP ceiling (and locked on a private ZooKeeper), one table of ratios;
##        then the Go benchmarks of the lock (Redis lock, redsync, ZooKeeper), of a batched commit, of shopper-token verification (HS256 vs public keys, cached and not)
##        and of one order request through the HTTP path alone (BenchmarkPlaceOrderHTTP), summarised by benchstat;
##        the HTTP runs use the MariaDB at -mysql (default root@tcp(127.0.0.1:3306)/), the Go benchmarks throwaway servers
##        (BENCH_ARGS="-duration 20s", GOBENCH_COUNT=6)
GOBENCH_COUNT ?= 6
bench: deps
	$(GO) run ./bench $(BENCH_ARGS)
	mkdir -p loadtest/results
	./scripts/with-test-servers.sh sh -c '$(GO) -C lock test -run "^$$" -bench . -benchmem -count $(GOBENCH_COUNT) . && \
		$(GO) -C lock/zookeeper test -run "^$$" -bench . -benchmem -count $(GOBENCH_COUNT) . && \
		$(GO) test -run "^$$" -bench . -benchmem -count $(GOBENCH_COUNT) ./repository/ ./internal/auth/ ./handler/' | tee loadtest/results/gobench.txt
	$(GO) run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da loadtest/results/gobench.txt

## loadtest: the k6 flash sale against 3 instances, verified (ARGS="-fault redis" ...)
loadtest: deps
	$(GO) run ./loadtest/cmd/loadtest $(ARGS)
