# optc: the two commands a newcomer needs are `make demo` and `make test`.
GO      ?= go
BIN     := bin/optc
EXAMPLE := testdata/models/mnist_cnn.onnx

.PHONY: build install demo test race testdata ort release release-check ci-recipe gate-rates fuzz bench bench-quick bench-ocr bench-io bench-big bench-passes bench-int8 bench-prune bench-lm bench-dynamic lm vet sweep zoo zoo-models

# The version and commit optc is built from, for `optc version` and every
# report: one version string (scripts/version.sh: the tag at HEAD, else
# HEAD's Go pseudo-version) for make build, install and release; the go
# command records the commit itself only in a plain clone (not in a git
# worktree, nor with -buildvcs=false).
VERSION ?= $(shell scripts/version.sh)
LDFLAGS := -X github.com/optc-dev/optc/cmd.Version=$(VERSION) \
	-X github.com/optc-dev/optc/cmd.Commit=$(shell git rev-parse HEAD 2>/dev/null) \
	-X github.com/optc-dev/optc/cmd.Modified=$(shell git status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo true || echo false)

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/optc

# optc into $(go env GOPATH)/bin, as `go install github.com/optc-dev/optc/cmd/optc@latest`
# does from outside a checkout.
install:
	$(GO) install -ldflags '$(LDFLAGS)' ./cmd/optc

# Builds the bundled example: an INT8 build of the MNIST CNN for ONNX
# Runtime, TensorRT and Triton (testdata/mnist/optc.yaml: calibration and
# evaluation on the bundled PNG digits), every artifact checked and timed
# in ONNX Runtime, into out/mnist.
demo: build ort
	./$(BIN) build --config testdata/mnist/optc.yaml --force

# Fetches what the tests need (cached, checksummed; the model zoo is
# generated) and runs every test,
# then a short fuzzing pass over every parser. The package timeout is
# raised from go test's 10 minutes: ./cmd runs every command end to end and
# takes longer than that on a loaded 2-core machine. GOTESTFLAGS go to every
# go test (CI: -count=1, so that nothing is served from the test cache).
# The fuzzing pass is counted in executions, not seconds: Go 1.26's fuzzer can fail a time-bounded run
# with "context deadline exceeded" as the time runs out (golang/go#75804).
GOTESTFLAGS ?=
test: testdata zoo-models ort vet
	$(GO) test -timeout=45m $(GOTESTFLAGS) ./...
	$(MAKE) --no-print-directory race
	$(MAKE) --no-print-directory fuzz FUZZTIME=30000x

# The tests of what runs in parallel, under the race detector: bench's
# concurrent requests, build's interrupt path, temporaries registered by
# parallel writers, concurrent reads of external data.
race:
	$(GO) test $(GOTESTFLAGS) -race -run='^(TestConcurrent.*|TestBuildInterrupted|TestBuildFailureLeavesNothing)$$' \
		./bench ./build ./graph ./internal/atomicfile

# Every fuzz target, as package:Target. Their seeds are real files; the
# inputs that once failed are kept under <package>/testdata/fuzz/<Target>/.
FUZZ_TARGETS := graph:FuzzParse graph:FuzzParseTensor graph:FuzzLoadExternal \
	data:FuzzReadNpyHeader data:FuzzReadNpy data:FuzzOpenNpz \
	calibrate:FuzzReadCache export:FuzzReadTRTCalibCache config:FuzzDecode \
	report:FuzzParse

testdata:
	scripts/fetch-testdata.sh

# The model zoo (docs/zoo.md): torchvision architectures, a BERT-like
# encoder, LSTM, GRU, an If model, a U-Net, a Conv3d video net, a raw-audio
# Conv1d encoder, a recommender with int64 ids, a decoder with a KV cache
# and a small causal LM (lm_tiny: trained
# with scripts/lm/train.py's code, about 2 CPU minutes), exported to ONNX by
# scripts/zoo/gen.py into the cache folder (zoo/, with zoo/models.json).
# Needs Debian's python3-torch, python3-torchvision and python3-onnx and
# installs them when /usr/bin/python3 cannot import them (CI runs as root on
# Debian 12). Models already made by the same generator are kept; a first
# run takes about 3 minutes, the apt install about 3 more.
PYTHON   ?= /usr/bin/python3
ZOO_PKGS := python3-torch python3-torchvision python3-onnx
zoo-models:
	@$(PYTHON) -c 'import torch, torchvision, onnx' 2>/dev/null || { \
		echo "zoo-models: installing $(ZOO_PKGS)" >&2; \
		sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
		export DEBIAN_FRONTEND=noninteractive; \
		$$sudo apt-get install -y --no-install-recommends $(ZOO_PKGS) || \
		{ $$sudo apt-get update -qq && $$sudo apt-get install -y --no-install-recommends $(ZOO_PKGS); }; }
	$(PYTHON) scripts/zoo/gen.py

# Every zoo model and variant through inspect, optimize, quantize (random
# and calibration-file data) and build --int8 --target all, each written
# .onnx validated by onnx.checker; writes docs/zoo.md and fails when any
# step fails. Takes hours on 2 cores (see docs/zoo.md); ZOO_MODELS=a,b/v
# runs a subset.
zoo: zoo-models ort
	ZOO=full ZOO_REPORT=$(CURDIR)/docs/zoo.md $(GO) test -count=1 -timeout=0 -run='^TestZoo$$' -v ./tools/zoo

# The ONNX Runtime 1.24.1 CPU library for this machine, fetched by optc
# itself from the npm package onnxruntime-node and checked against the
# sha256s built into it (optc runtime install; nothing when already cached).
ort: build
	./$(BIN) runtime install >/dev/null

# docs/ci.md's recipe for a model repository, end to end
# (tools/cirecipe): go install of optc from a local module proxy into an
# empty HOME, optc runtime install from a local npm-shaped registry, both
# builds, optc diff, the comment (gh stubbed) and the gate. A few minutes;
# not part of make test.
ci-recipe:
	OPTC_CI_RECIPE=1 $(GO) test -count=1 -timeout=30m -run='^TestCIRecipe$$' -v ./tools/cirecipe

# optc diff --remeasure's false-alarm and detection rates against a 10%
# gate (docs/ci.md): GATE_RATES_N rounds of five builds of a conv stack
# (the same config twice, one of them while every core is kept busy, and
# once more under load; ORT level disable, about 1.7x slower; one conv
# more, about 14%) and four remeasured diffs, each up to GATE_RATES_TIME;
# prints the verdicts' counts and median rounds, time and ratio, and the
# recorded runs' verdicts beside them. Run it on a quiet machine: several
# minutes at N=20. Not part of make test.
GATE_RATES_N    ?= 20
GATE_RATES_TIME ?= 20s
gate-rates: ort
	OPTC_GATE_RATES=$(GATE_RATES_N) OPTC_GATE_RATES_TIME=$(GATE_RATES_TIME) $(GO) test -count=1 -timeout=0 -run='^TestGateRates$$' -v ./cmd

# apt-get install of the packages $(1), as root or with sudo (CI runs as
# root on Debian 12), updating the package index only when needed.
apt_install = sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; export DEBIAN_FRONTEND=noninteractive; \
	$$sudo apt-get install -y --no-install-recommends $(1) || \
	{ $$sudo apt-get update -qq && $$sudo apt-get install -y --no-install-recommends $(1); }

# Release binaries into dist/: optc-VERSION-linux-amd64 and -linux-arm64
# (cgo on; arm64 cross-compiled with Debian's gcc-aarch64-linux-gnu, which
# is installed when missing), SHA256SUMS and the Dockerfile
# (scripts/release.sh). VERSION=v0.1.0 make release; the default is
# scripts/version.sh's. It says before it installs the cross compiler
# (about 160 MB of packages) and stops instead with RELEASE_NO_INSTALL=1.
release:
	VERSION=$(VERSION) scripts/release.sh

# Runs the release binaries: linux/amd64 here, linux/arm64 under
# qemu-user-static with Debian's arm64 libraries (installed when missing):
# version, inspect, runtime list, and run over the bundled MNIST digits with
# each platform's ORT library from the same npm tarball; the two must agree.
# About 4 minutes from cold (the arm64 cross-compile), 1.5 warm on 2 cores,
# so it is not part of make test.
QEMU_PKGS := qemu-user-static libstdc++6-arm64-cross
release-check: release
	@{ command -v qemu-aarch64-static || command -v qemu-aarch64; } >/dev/null && \
		test -e /usr/aarch64-linux-gnu/lib/libstdc++.so.6 || { \
		echo "release-check: installing $(QEMU_PKGS)" >&2; $(call apt_install,$(QEMU_PKGS)); }
	OPTC_RELEASE_DIR=$(CURDIR)/dist $(GO) test -count=1 -timeout=20m -run='^TestReleaseBinaries$$' -v ./tools/release

vet:
	@test -z "$$(gofmt -l .)" || { echo "gofmt needed:"; gofmt -l .; exit 1; }
	$(GO) vet ./...

# What `optc optimize` does, default check included, and then `optc build`
# (ORT target), over every ONNX backend test model (about 1,070),
# classified: ran, not expressible, ORT cannot run the original,
# static-batch, failed (must be 0). Prints the tables that docs/optimize.md
# records. `go test ./cmd` runs a subset of each.
sweep: testdata ort
	OPTC_SWEEP=full $(GO) test -count=1 -timeout=30m -run='^TestBackend(Build)?Sweep$$' -v ./cmd

# A longer fuzzing run, FUZZTIME per target (FUZZTIME=10m make fuzz).
FUZZTIME ?= 2m
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
		echo "fuzz $$t ($(FUZZTIME))"; \
		$(GO) test -run='^$$' -fuzz="^$${t#*:}\$$" -fuzztime=$(FUZZTIME) ./$${t%%:*}; \
	done

# The benchmark suite (docs/BENCHMARKS.md): every row a ratio of two things
# measured side by side, repeated; the table is printed and written with
# the JSON results into out/bench. bench-quick (MNIST and cls, fewer
# repeats) takes under 3 minutes; bench takes about 30-35 minutes, of
# which bench-ocr (PP-OCRv4 det and rec: FP32, plain INT8 and each
# post-training technique, scored by their task metric on the rendered
# ground truth, and timed) about 15.
bench: testdata ort
	$(GO) run ./tools/benchsuite/run -o out/bench

bench-ocr: testdata ort
	$(GO) run ./tools/benchsuite/run -only "ocr task" -o out/bench-ocr

bench-quick: testdata ort
	$(GO) run ./tools/benchsuite/run -quick -o out/bench

# Load+save throughput and peak memory on a 512 MiB synthetic model.
bench-io:
	$(GO) test -run='^$$' -bench=LoadSave -benchtime=3x ./graph

# inspect, convert, optimize and build --int8 of a synthetic 2.1 GiB model
# with external data: peak RSS, anonymous and file-backed memory, and time
# of each (not part of make test).
bench-big: ort
	$(GO) test -run='^$$' -bench=BigModel -benchtime=1x -timeout=60m ./cmd

# Pass pipeline cost on 10k/100k-node graphs, and ORT latency of each real
# model optimized vs original (levels disable and all).
bench-passes: testdata ort
	$(GO) test -run='^$$' -bench=Pipeline -benchtime=3x ./passes
	$(GO) test -run='^$$' -bench=OptimizedVsOriginal -benchtime=1x -timeout=30m ./optimize

# INT8 against float on a ResNet-style conv stack, measured by optc quantize's code.
# docs/prune.md's table: MNIST, PaddleOCR cls and rec pruned without and
# with calibration data (reconstruction / OBS), scored on held-out data,
# and cls latency; about 15 minutes on 2 cores. OPTC_PRUNE_MODELS=mnist,cls
# picks models.
bench-prune: testdata ort
	$(GO) test -run='^$$' -bench=PruneFigures -benchtime=1x -timeout=90m -v ./prune

# The small decoder LM the weight-only figures are measured on
# (docs/transformers.md): scripts/lm/train.py trains it on license texts
# shipped with Debian (checksummed) into the cache folder (lm/). Kept when
# made by the same script; training takes 10-60 minutes on 2 shared cores,
# so it is not part of `make test` (the zoo's lm_tiny is its CI-sized
# setting).
lm: zoo-models
	$(PYTHON) scripts/lm/train.py

# Perplexity, next-token agreement, size and latency of the LM at FP32,
# int4 and int3 (RTN and GPTQ) in ORT; prints the table (LM_REPORT=FILE
# also writes it).
bench-lm: lm ort
	$(GO) test -run='^$$' -bench=LMFigures -benchtime=1x -timeout=60m -v ./weightonly

bench-dynamic: ort
	$(GO) test -run='^$$' -bench=DynamicZoo -benchtime=1x -timeout=30m ./ptq

bench-int8: ort
	$(GO) test -run='^$$' -bench=ConvStackInt8 -benchtime=1x ./ptq
