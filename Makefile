# Vigil soak runs. CI runs .ci/run; nothing else uses this file.
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
STRESS_BIN      ?= /tmp/vigil-stress-bin
STRESS_DURATION ?= 10m
STRESS_THREADS  ?= 4
STRESS_FAULTS   ?= 0.002
STRESS_DIR      ?= /tmp/vigil-stress-soak
STRESS          := $(STRESS_BIN) stress --duration=$(STRESS_DURATION) --threads=$(STRESS_THREADS) --progress=30s

.PHONY: stress stress-bin stress-none stress-inprocess stress-kill stress-faults stress-corrupt

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
