# Vigil's everyday targets.
#
#   make test     go test ./...            (the README's test command, quick)
#   make race     go test -race -tags invariants -count=1 ./...  (as CI
#                 runs it), then raftstore's race tests
#   make lint     gofmt, go vet (linux and the five other platforms CI
#                 vets), staticcheck (pinned, installed by go install)
#   make tidy     go mod tidy -diff, every module
#   make ci       .ci/run: exactly what CI runs, in order (lint, tidy,
#                 race, bit-flip sweeps, kvbench and stress smoke runs,
#                 bench/peers and raftstore)
#   make bench    the Go benchmarks once, and a short kvbench run
#   make stress   the soak runs below
#
# Soak runs:
#
#   make stress                        # 10 minutes per mode, random seeds
#   make stress STRESS_DURATION=1h     # longer
#   make stress STRESS_THREADS=8
#   make stress-inprocess              # one mode only (also: -none, -kill,
#                                      # -faults, -corrupt)
#
# `stress` soaks the stress runner (vigil stress, package tests/stress) in
# every mode, one after the other, each for STRESS_DURATION with its own
# random seed: no crashes; in-process crashes on a strict in-memory file
# system; SIGKILLed child processes on a real directory (under
# STRESS_DIR); in-process crashes with injected I/O faults (rate
# STRESS_FAULTS); and memory bit flips. Each run prints its seed and DB
# options first and its summary last; it stops at the first divergence,
# exits 1, and the report's replay line reruns it (vigil stress --seed=N
# ...).

GO              ?= go
STATICCHECK_VER ?= v0.8.2
GOBIN           ?= $(shell $(GO) env GOPATH)/bin
STRESS_BIN      ?= /tmp/vigil-stress-bin
STRESS_DURATION ?= 10m
STRESS_THREADS  ?= 4
STRESS_FAULTS   ?= 0.002
STRESS_DIR      ?= /tmp/vigil-stress-soak
STRESS          := $(STRESS_BIN) stress --duration=$(STRESS_DURATION) --threads=$(STRESS_THREADS) --progress=30s

PLATFORMS       ?= windows/amd64 darwin/arm64 darwin/amd64 freebsd/amd64 linux/arm64

.PHONY: test race lint tidy ci bench stress stress-bin stress-none stress-inprocess stress-kill stress-faults stress-corrupt

test:
	$(GO) test ./...

race:
	$(GO) test -race -tags invariants -count=1 ./...
	cd raftstore && $(GO) test -race -count=1 ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	for p in $(PLATFORMS); do GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) vet ./... || exit 1; \
		(cd raftstore && GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) vet ./...) || exit 1; done
	$(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VER)
	$(GOBIN)/staticcheck ./...
	cd bench/peers && $(GOBIN)/staticcheck ./...
	cd raftstore && $(GO) vet ./... && $(GOBIN)/staticcheck ./...

tidy:
	$(GO) mod tidy -diff
	cd bench/peers && $(GO) mod tidy -diff
	cd raftstore && $(GO) mod tidy -diff

ci:
	bash .ci/run

bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x ./...
	$(GO) run ./cmd/vigil kvbench --benchmarks=fillseq,fillrandom,readrandom,readseq --num=200000

stress: stress-none stress-inprocess stress-kill stress-faults stress-corrupt

stress-bin:
	$(GO) build -o $(STRESS_BIN) ./cmd/vigil

stress-none: stress-bin
	$(STRESS) --crash=none

stress-inprocess: stress-bin
	$(STRESS) --crash=inprocess

stress-kill: stress-bin
	$(STRESS) --crash=kill --dir=$(STRESS_DIR)

stress-faults: stress-bin
	$(STRESS) --crash=inprocess --faults=$(STRESS_FAULTS)

stress-corrupt: stress-bin
	$(STRESS) --crash=none --corrupt-memory
