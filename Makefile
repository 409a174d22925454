# Palace: one Makefile for the whole workspace.
# Tools are pinned here and installed into ./bin.
BUF_VERSION            := v1.75.0
PROTOC_GEN_GO_VERSION  := v1.36.12
PROTOC_GEN_GRPC_VERSION := v1.6.2
GRPCURL_VERSION        := v1.9.4

BIN     := $(CURDIR)/bin
BUF     := $(BIN)/buf
# Every module of go.work, as package patterns (go test ./... at the root
# does not cross module boundaries).
MODULES := $(shell go list -f '{{.Dir}}/...' -m)
MODULE_DIRS := $(shell go list -f '{{.Dir}}' -m)
DAEMONS := rulesd gamed clockd matchmakingd aid
# The packages whose tests take longest, named ahead of the rest: go test
# starts packages in the order given, -p (the core count) at a time, so one
# of them started last would run alone at the end and set the wall time.
SLOW_TEST_PKGS := ./services/game ./cmd/palace
GOTEST_FLAGS ?=

.PHONY: all tools gen gen-check lint breaking build test test-short run bench fuzz clean

all: lint build test

$(BUF):
	GOBIN=$(BIN) go install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
$(BIN)/protoc-gen-go:
	GOBIN=$(BIN) go install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
$(BIN)/protoc-gen-go-grpc:
	GOBIN=$(BIN) go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GRPC_VERSION)
$(BIN)/grpcurl:
	GOBIN=$(BIN) go install github.com/fullstorydev/grpcurl/cmd/grpcurl@$(GRPCURL_VERSION)

## tools: install the pinned code generators and grpcurl into ./bin
tools: $(BUF) $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc $(BIN)/grpcurl

## gen: regenerate pkg/gen from proto/
gen: $(BUF) $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc
	$(BUF) generate

## gen-check: fail when pkg/gen is not what proto/ generates
gen-check: $(BUF) $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc
	./scripts/gen-check.sh

## lint: buf lint, go vet, gofmt, and every go.mod tidy (so GOWORK=off builds work)
lint: $(BUF)
	$(BUF) lint
	go vet $(MODULES)
	@for d in $(MODULE_DIRS); do (cd $$d && go mod tidy -diff >/dev/null) || { echo "go mod tidy needed in $$d"; exit 1; }; done
	@out=$$(gofmt -l $$(git ls-files '*.go') 2>/dev/null); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## breaking: compare the API with main
breaking: $(BUF)
	$(BUF) breaking --against '.git#branch=main'

## build: bin/palace and every daemon
build:
	cd cmd/palace && go build -o $(BIN)/palace .
	@for d in $(DAEMONS); do s=$${d%d}; (cd services/$$s && go build -o $(BIN)/$$d ./cmd/$$d) || exit 1; done

## test: every module's tests (Redis tests use REDIS_ADDR or start redis-server)
test:
	go test $(GOTEST_FLAGS) $(SLOW_TEST_PKGS) $(MODULES)

## test-short: skip the slow parts (deep perft, long soaks)
test-short:
	go test -short $(GOTEST_FLAGS) $(SLOW_TEST_PKGS) $(MODULES)

## run: every service in one process on localhost:8080, in-process Redis
run: build
	$(BIN)/palace serve

## bench: benchmarks of every module
bench:
	go test -run '^$$' -bench . -benchmem $(MODULES)

## fuzz: a short run of every parser fuzz target
fuzz:
	./scripts/fuzz.sh 20s

clean:
	rm -rf $(BIN)
