#!/usr/bin/env bash
# The verdict on the real Megatron-Core: exhaustive megatron-engine
# searches of bench/verdict/presets (a GPU-bound dense model, a host-bound
# one, a drop-and-pad MoE; Megatron-Core's local spec), each with its JSON
# result, report and emitted overrides, into OUT (default /tmp/verdict).
#   MLM=<Megatron-LM checkout> bench/verdict/run.sh [PRESET...]
# cgtune is built at bin/cgtune; a search gets LIMIT seconds (default 170);
# REFSTEPS=0 leaves out the whole-model reference runs.
cd "$(dirname "$0")/../.."
export PYTHONPATH=${MLM:-$PWD/.mlm} PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
OUT=${OUT:-/tmp/verdict}; mkdir -p "$OUT"
presets=("$@"); [ ${#presets[@]} -eq 0 ] && presets=(dense-a-mbs1 dense-small-mbs1 moe-a-mbs1)
# The framework's own whole-model runs of the preset's eager and graphed
# modes (bench/memory/peaks.py, REFSTEPS steps each), before and after its
# search: Megatron-Core's host-bound eager step drifts over minutes, so the
# slice's verdict is set against the whole model measured around it
# (bench/verdict/compare.py).
# REFMODES picks the modes (default: none local full_iteration); REFAFTER
# runs the "after" pass that many times.
reference() { # PRESET before|after|after2...
  [ "${REFSTEPS:-12}" -gt 0 ] || return 0
  python3 bench/verdict/reference.py "$1" "${REFSTEPS:-12}" "$OUT/cases-$1.json" ${REFMODES:-} || return 0
  : >"$OUT/reference-$1-$2.jsonl"
  python3 bench/memory/peaks.py "$OUT/cases-$1.json" "$OUT/reference-$1-$2.jsonl" >/dev/null 2>"$OUT/reference-$1-$2.err"
  echo "== $p: whole-model reference ($2) rc=$?"
}
for p in "${presets[@]}"; do
  reference "$p" before
  t0=$(date +%s)
  timeout -s INT -k 10 "${LIMIT:-170}" bin/cgtune --headless --engine megatron --preset "bench/verdict/presets/$p.yaml" \
    --strategy exhaustive --skip-profile ${MAXLAYERS:+--max-layers "$MAXLAYERS"} --run-dir "$OUT/run-$p" --json \
    --report "$OUT/$p.md" --emit "$OUT/$p.yaml" >"$OUT/$p.json" 2>"$OUT/$p.err"
  echo "== $p: rc=$? wall $(( $(date +%s) - t0 )) s"
  python3 - "$OUT/$p.json" <<'PY'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    sys.exit("no result: %s" % e)
for r in d["ranking"]:
    res = r["result"]; c = res["candidate"]; m = res.get("memory", {}); b = m.get("breakdown") or {}
    print("%-34s %-9s step %8.2f eager %8.2f x%.3f vsref %.3f emu=%s peak_res %s total-ctx %s graph %s %s" % (
        c["impl"] + " " + ",".join(c.get("scopes") or []) + " w%d" % c["warmup"], res["source"],
        res["step"]["median_ms"], res["eager"]["median_ms"], res.get("speedup", 0), r.get("vs_reference", 0),
        r.get("emulated", False), m.get("process_peak_mib"), (b.get("total", 0) - b.get("context", 0)) if b else None,
        m.get("graph_mib"), (res.get("error") or "")[:100]))
win = (d.get("winner") or {}).get("result", {})
print("winner:", win.get("candidate"))
print("winner's scaling:", win.get("scaling"), "| layer share", (win.get("raw") or {}).get("layer_share"))
print("eager:", [n for n in win.get("notes") or [] if n.startswith("eager baseline")])
print("reference:", d.get("reference_text"))
print("emulation:", json.dumps(d.get("emulation")))
PY
  for i in $(seq 1 "${REFAFTER:-1}"); do reference "$p" "after$([ "$i" -gt 1 ] && echo "$i")"; done
done
python3 bench/verdict/compare.py "$OUT" "${presets[@]}"
