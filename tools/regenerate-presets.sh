#!/usr/bin/env bash
# Regenerates cgtune's built-in model presets from a Megatron-Bridge release
# (docs/mb-generator.md): dumps its perf recipes in the sandbox, generates
# presets/models/*.yaml from the dumps, and checks the result.
#
#   tools/regenerate-presets.sh --mb v0.7.0 --mb-repo MB.git --mcore-repo MLM.git
#
# The arguments are tools/mbrecipes/dump.py's ($MB_REPO and $MCORE_REPO
# stand in for the two repositories). PYTHON picks the interpreter
# (default python3; it needs PyYAML).
set -euo pipefail
cd "$(dirname "$0")/.."
"${PYTHON:-python3}" tools/mbrecipes/dump.py "$@"
. scripts/env.sh
go run ./tools/genpresets
go run ./tools/genpresets -check
go test ./tools/genpresets ./mbconfig ./presets
