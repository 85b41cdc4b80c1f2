# personaq — `make help` lists the targets.
SHELL := bash
GO ?= go
GOBIN := $(shell $(GO) env GOPATH)/bin
STATICCHECK_VERSION ?= v0.8.2
# Extra flags for `make bench-peers` (see `go run ./cmd/peers -h` in integration/peers).
PEERS_FLAGS ?=
export TESTCONTAINERS_RYUK_DISABLED ?= true
export TESTCONTAINERS_HOST_OVERRIDE ?= 127.0.0.1

.PHONY: help build test lint bench bench-containers bench-peers fuzz images integration tools clean screenshots docs

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## build bin/personaq
	$(GO) build -buildvcs=auto -trimpath -o bin/personaq ./cmd/personaq

test: ## unit and behaviour tests against in-process NATS and a real redis-server, with -race
	$(GO) test -race -count=1 -timeout 15m ./...

lint: tools ## gofmt, go vet, staticcheck
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags integration ./integration/...
	$(GOBIN)/staticcheck ./...
	$(GOBIN)/staticcheck -tags integration ./integration/...
	@# The peers module replaces personaq with ../..: -mod=mod lets its go.sum
	@# follow the main module's dependencies instead of failing on a stale one.
	cd integration/peers && GOFLAGS=-mod=mod $(GO) vet ./... && GOFLAGS=-mod=mod $(GOBIN)/staticcheck ./...

tools: ## install staticcheck from the Go module proxy
	@test -x $(GOBIN)/staticcheck || $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

bench: ## benchmarks behind BENCHMARKS.md (needs redis-server; ~20 min)
	$(GO) test -run='^$$' -bench='^BenchmarkPipelineRatio$$' -benchtime=1x -count=3 -timeout 30m ./consumers/
	$(GO) test -run='^$$' -bench='^BenchmarkPipeline$$' -benchtime=5000x -count=3 -timeout 30m ./consumers/
	$(GO) test -run='^$$' -bench='^BenchmarkTracingRatio$$' -benchtime=3x -count=3 -timeout 30m ./consumers/
	$(GO) test -run='^$$' -bench='^BenchmarkRedeliveryLateness$$' -benchtime=1x -count=3 -timeout 30m ./consumers/
	$(GO) test -run='^$$' -bench='^BenchmarkSlowInFlight$$' -benchtime=1x -count=3 -timeout 30m ./consumers/
	$(GO) test -run='^$$' -bench='^BenchmarkSlowInFlightSteady$$' -benchtime=1x -count=2 -timeout 30m ./consumers/
	$(GO) test -run='^$$' -bench='^BenchmarkSlotCeiling$$' -benchtime=1x -count=3 -timeout 30m ./consumers/
	$(GO) test -run='^$$' -bench=. -skip='^BenchmarkLedgerScriptInstructions$$' -benchmem -count=1 -timeout 30m ./consumers/ledger/ ./schemas/
	$(GO) test -run='^$$' -bench='^BenchmarkLedgerScriptInstructions$$' -benchtime=2000x -count=1 -timeout 30m ./consumers/ledger/
	$(GO) test -run='^$$' -bench='^BenchmarkScaleOut$$' -benchtime=1x -count=3 -timeout 30m ./consumers/
	$(GO) test -run='^$$' -bench='^BenchmarkFailover$$' -benchtime=1x -count=3 -timeout 30m ./consumers/
	$(GO) test -run='^$$' -bench='^BenchmarkSubmitAwait$$' -benchtime=300x -count=3 -timeout 30m ./consumers/client/
	$(GO) test -run='^$$' -bench=QuarantinePage -benchtime=20x -count=3 -timeout 30m ./cmd/console/
	$(GO) test -run='^$$' -bench='^BenchmarkFlowLimiter$$' -benchtime=1x -count=3 -timeout 30m ./consumers/
	$(GO) test -run='^$$' -bench='^BenchmarkFlowCircuit$$' -benchtime=1x -count=3 -timeout 30m ./consumers/
	$(GO) test -run='^$$' -bench='^BenchmarkCancel' -benchtime=1x -count=1 -timeout 30m ./consumers/
	$(GO) test -run='^$$' -bench='^BenchmarkSubmitAwait' -benchtime=1000x -count=1 -timeout 30m ./cmd/api/
	$(GO) test -run='^$$' -bench='^BenchmarkLongPolls10k$$' -benchtime=1x -count=1 -timeout 30m ./cmd/api/
	$(GO) test -run='^$$' -bench='^BenchmarkLiveOutput$$' -benchtime=1x -count=1 -timeout 30m ./consumers/
	$(GO) test -run='^$$' -bench='^BenchmarkPipelineFsyncs$$' -benchtime=1x -count=1 -timeout 30m ./consumers/
	$(GO) test -run='^$$' -bench='^BenchmarkPipelineFloor$$' -benchtime=1x -count=3 -timeout 30m ./consumers/

bench-containers: images ## benchmarks on real containers behind BENCHMARKS.md (needs Docker; ~8 min)
	$(GO) test -tags integration -run='^$$' -bench='^BenchmarkReplicaSlowInFlightContainer$$' -benchtime=1x -count=2 -timeout 25m ./integration/

bench-peers: ## asynq and River versus personaq (needs redis-server, postgresql; ~10 min; BENCHMARKS.md)
	@command -v redis-server >/dev/null || test -x /usr/bin/redis-server || { echo "bench-peers: redis-server not found: apt-get install redis-server"; exit 1; }
	@ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || command -v postgres >/dev/null || test -n "$$PERSONAQ_PG_BIN" || { echo "bench-peers: PostgreSQL server not found: apt-get install postgresql (or set PERSONAQ_PG_BIN)"; exit 1; }
	@mkdir -p bin
	cd integration/peers && GOFLAGS=-mod=mod $(GO) run ./cmd/peers -cpuprofile $(CURDIR)/bin/peers-personaq.pprof $(PEERS_FLAGS)

fuzz: ## fuzz the message decoders for 30s each
	$(GO) test -run='^$$' -fuzz=FuzzDecodeRequest -fuzztime=30s ./schemas/
	$(GO) test -run='^$$' -fuzz=FuzzDecodeQuarantineRecord -fuzztime=30s ./schemas/

docs: ## regenerate docs/cli.md from the command tree (go test ./cmd/cli/ checks it is current)
	$(GO) test -count=1 -run='^TestCLIReferenceIsCurrent$$' ./cmd/cli/ -args -update-docs

screenshots: ## regenerate the console screenshots in docs/console.md (needs chromium and redis-server)
	PERSONAQ_SCREENSHOTS=1 $(GO) test -count=1 -run='^(TestOverview|TestQuarantine|TestTaskPage)' ./cmd/console/

images: ## build the offline container images (nats, redis, personaq)
	bash integration/images/build.sh

integration: images ## integration suite on real containers (testcontainers-go; integration/README.md)
	$(GO) test -tags integration -count=1 -timeout 20m -v ./integration/...

clean: ## remove build output
	rm -rf bin .personaq
