#!/usr/bin/env bash
# Runs every test that needs no GPU: go vet, then go test ./... (GPU tests
# sit behind the gpu build tag and run on a GPU machine: see bench/README.md).
set -e
cd "$(dirname "$0")"
. scripts/env.sh
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt needed: $unformatted" >&2; exit 1; fi
go vet ./...
# The embedded Python (the Megatron-Core worker, the NCCL probe): pure parts, no torch needed.
python3 -m unittest discover -s engine/megatron/pyworker -p 'test_*.py' -q
python3 -m unittest discover -s probes -p 'test_*.py' -q
# The Megatron-Bridge sandbox and recipe dumper (tools/): pure parts, no MB needed.
python3 -m unittest discover -s tools/mbsandbox -p 'test_*.py' -q
python3 -m unittest discover -s tools/mbrecipes -p 'test_*.py' -q
# The differential harness of the rule table (tools/mbdiff): pure parts, no MB needed.
python3 -m unittest discover -s tools/mbdiff -p 'test_*.py' -q
# The recipe runner cgtune --recipe embeds: pure parts.
python3 -m unittest discover -s internal/mbimport/pyrecipe -p 'test_*.py' -q
# cmd/cgtune's tests run whole searches; on a busy 2-core machine they take
# longer than go test's default bound of 10 minutes per package.
go test -timeout 30m ./... "$@"
