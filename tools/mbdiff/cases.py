"""The pure parts of the differential harness: the built-in layouts it
covers, the case grid, values in cgtune's --set spelling and back, the
corpus file and its summary. Standard library only; unit-tested by
test_cases.py (./test.sh).

A case is one `cgtune check` command line:

    cgtune check --model M --gpu-type G --mbridge V [--impl I] [--scope a,b]
                 --warmup N --set k=v ...

and the corpus line records it with what MB's own start-up did with it:
    {"model","gpu","mbridge","impl","scopes","warmup","set","base",
     "accept","message","raised_by","recipe"}
"base" is the recipe as MB's recipe function of that release built it (the
keys of keys.txt, --set spelling), so that the Go side judges the same
configuration MB judged whatever the built-in presets say later; "set" is
what the case changes on top of it.
"""

import gzip
import io
import json
import os
import re
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
KEYS_FILE = os.path.join(HERE, "keys.txt")

# --- the built-in layouts ---------------------------------------------------

_ENTRY = re.compile(r"^- (\w+): (.*)$")
_FIELD = re.compile(r"^  (\w+): (.*)$")
_PERF_FILE = re.compile(r"^src/megatron/bridge/perf_recipes/([^/]+)/([^/]+)/[^/]+\.py$")


def read_index(text):
    """[(model, gpu, family, file, function)] of the layouts a recorded
    recipe dump selects (presets/testdata/mbrecipes/index.yaml, written by
    tools/mbrecipes/dump.py): each built-in model's layout per GPU type and
    the MB perf recipe it is generated from. family is the recipe's
    perf_recipes folder. The file is machine-written: one "- key: value"
    line opens an entry, "  key: value" lines follow; lists under a key
    (hf_configs) are skipped."""
    entries, cur = [], None
    for line in text.splitlines():
        m = _ENTRY.match(line)
        if m:
            cur = {m.group(1): m.group(2).strip()}
            entries.append(cur)
            continue
        m = _FIELD.match(line)
        if m and cur is not None:
            cur[m.group(1)] = m.group(2).strip()
    out = []
    for e in entries:
        if e.get("selected") != "true":
            continue
        m = _PERF_FILE.match(e.get("file", ""))
        if not m or not e.get("model") or not e.get("gpu") or not e.get("function"):
            raise ValueError(f"index entry {e.get('function', '?')}: want model, gpu, function and a perf_recipes file")
        out.append((e["model"], e["gpu"], m.group(1), e["file"], e["function"]))
    return out


# MB v0.4's precision names (scripts/performance/utils/precision.py)
# for the precision part of a perf-recipe name.
V04_PRECISION = {"bf16": "bf16", "fp8cs": "fp8_cs", "fp8mx": "fp8_mx", "fp8ds": "fp8_ds", "fp8sc": "fp8_sc", "nvfp4": "nvfp4"}

# --- values ------------------------------------------------------------------


def read_keys(text):
    """The dotted keys of keys.txt: one a line, # comments."""
    return [k for k in (line.split("#", 1)[0].strip() for line in text.splitlines()) if k]


def load_keys():
    with open(KEYS_FILE, encoding="utf-8") as f:
        return read_keys(f.read())


def set_text(value):
    """A Python config value in cgtune's --set spelling (Hydra's: true,
    null, 1.0, [a,b]); None when it has none (a dict, an object)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if hasattr(value, "name") and type(value).__module__ not in ("builtins",) and not isinstance(value, (int, float, str)):
        value = value.name  # an enum member (CudaGraphScope.attn)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        parts = [set_text(v) for v in value]
        if any(p is None or "," in p or "[" in p for p in parts):
            return None
        return "[" + ",".join(parts) + "]"
    return None


_INT = re.compile(r"^[+-]?\d+$")
_FLOAT = re.compile(r"^[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?$")


def hydra_value(text):
    """The Python value a Hydra override's right-hand side gives (the
    grammar cgtune's --set reads: null, true/false, int, float, [a,b],
    else a string)."""
    t = text.strip()
    if t.startswith("[") and t.endswith("]"):
        inner = t[1:-1].strip()
        return [hydra_value(p) for p in inner.split(",")] if inner else []
    if t.lower() == "null":
        return None
    if t.lower() in ("true", "false"):
        return t.lower() == "true"
    if _INT.match(t):
        return int(t)
    if _FLOAT.match(t):
        return float(t)
    return t


# --- the case grid ------------------------------------------------------------

TE, LOCAL, NONE = "transformer_engine", "local", "none"


def graph_settings(info):
    """The (impl, scopes) pairs every layout is checked with, as the perf
    harness's flags give them (None: the flag not given)."""
    moe = info["moe"]
    g = [
        (None, None),
        (NONE, None),
        (LOCAL, ["full_iteration"]),
        (LOCAL, None),
        (LOCAL, ["attn"]),
        (TE, ["attn"]),
        (TE, None),
        (TE, ["mlp"]),
        (TE, ["attn", "mlp"]),
        (TE, ["mamba"]),
        (TE, ["full_iteration"]),
        (TE, ["full_iteration", "attn"]),
        (TE, ["moe_router"]),
        (TE, ["moe_router", "moe_preprocess"]),
        (TE, ["attn", "moe_router", "moe_preprocess"]),
        (TE, ["moe"]),
        (TE, ["moe", "moe_router"]),
        (TE, ["moe_preprocess"]),
        (LOCAL, ["moe_router"]),
        ("full_iteration", None),
        ("bogus", None),
        (TE, ["full"]),
    ]
    if not moe:
        g = [x for x in g if not (x[1] and any(s.startswith("moe") for s in x[1])) or x[1] == ["moe_router"]]
    return g


def toggles(info):
    """The settings the rules read, as (name, {key: value}) groups each
    applied on its own; info says what the recipe is (moe, comm_overlap)
    and which keys its config has (settable): a group that sets a field
    the release does not have is left out."""
    moe = info["moe"]
    ep = "comm_overlap." if info["comm_overlap"] else "model."
    t = [
        ("nan_loss_on", {"rerun_state_machine.check_for_nan_in_loss": "true"}),
        ("nan_grad_on", {"ddp.check_for_nan_in_grad": "true"}),
        ("rng_off", {"model.use_te_rng_tracker": "false", "rng.te_rng_tracker": "false"}),
        ("rng_on", {"rng.te_rng_tracker": "true"}),
        ("legacy_local", {"model.enable_cuda_graph": "true"}),
        ("legacy_te", {"model.external_cuda_graph": "true"}),
        ("legacy_both", {"model.enable_cuda_graph": "true", "model.external_cuda_graph": "true"}),
        ("cpu_offload", {"model.cpu_offloading": "true"}),
        ("rec_full", {"model.recompute_granularity": "full", "model.recompute_method": "uniform", "model.recompute_num_layers": "1"}),
        ("rec_full_nomethod", {"model.recompute_granularity": "full", "model.recompute_method": "null", "model.recompute_num_layers": "null"}),
        ("rec_sel_core_dropout", {"model.recompute_granularity": "selective", "model.recompute_modules": "[core_attn]", "model.attention_dropout": "0.1"}),
        ("rec_sel_mlp_dropout", {"model.recompute_granularity": "selective", "model.recompute_modules": "[mlp]", "model.hidden_dropout": "0.1"}),
        ("rec_sel_layers", {"model.recompute_granularity": "selective", "model.recompute_num_layers": "2"}),
        ("scope_whole_layer", {"model.cuda_graph_scope": "[]"}),
        ("scope_attn", {"model.cuda_graph_scope": "[attn]"}),
        ("fgo_expert", {"model.fine_grained_activation_offloading": "true", "model.offload_modules": "[expert_fc1]", "env.NVTE_CPU_OFFLOAD_V1": "1"}),
        ("fgo_attn", {"model.fine_grained_activation_offloading": "true", "model.offload_modules": "[core_attn]", "env.NVTE_CPU_OFFLOAD_V1": "1"}),
        ("fgo_noenv", {"model.fine_grained_activation_offloading": "true", "model.offload_modules": "[core_attn]", "env.NVTE_CPU_OFFLOAD_V1": "null"}),
        ("fgo_inflight", {"model.fine_grained_activation_offloading": "true", "model.offload_modules": "[core_attn]",
                          "env.NVTE_CPU_OFFLOAD_V1": "1", "model.fine_grained_offloading_max_inflight_offloads": "1"}),
    ]
    if moe:
        t += [
            ("droppad", {"model.moe_expert_capacity_factor": "1.0", "model.moe_pad_expert_input_to_capacity": "true"}),
            ("pad_nocap", {"model.moe_expert_capacity_factor": "null", "model.moe_pad_expert_input_to_capacity": "true"}),
            ("cap_nopad", {"model.moe_expert_capacity_factor": "1.0", "model.moe_pad_expert_input_to_capacity": "false"}),
            ("alltoall", {"model.moe_token_dispatcher_type": "alltoall"}),
            ("allgather", {"model.moe_token_dispatcher_type": "allgather"}),
            ("shared_overlap", {"model.moe_shared_expert_overlap": "true"}),
            ("router_pad_fp8", {"model.moe_router_padding_for_fp8": "true"}),
            ("jitter_sel_moe", {"model.moe_input_jitter_eps": "0.01", "model.recompute_granularity": "selective", "model.recompute_modules": "[moe]"}),
            ("rec_sel_moe", {"model.recompute_granularity": "selective", "model.recompute_modules": "[moe]"}),
            ("ep_overlap", {ep + "overlap_moe_expert_parallel_comm": "true"}),
            ("ep_overlap_off", {ep + "overlap_moe_expert_parallel_comm": "false", ep + "delay_wgrad_compute": "false"}),
            ("delay_wgrad", {ep + "overlap_moe_expert_parallel_comm": "true", ep + "delay_wgrad_compute": "true"}),
            ("delay_wgrad_only", {ep + "overlap_moe_expert_parallel_comm": "false", ep + "delay_wgrad_compute": "true"}),
            ("delay_wgrad_nogaf", {ep + "overlap_moe_expert_parallel_comm": "true", ep + "delay_wgrad_compute": "true",
                                   "model.gradient_accumulation_fusion": "false"}),
            ("delay_wgrad_bias", {ep + "overlap_moe_expert_parallel_comm": "true", ep + "delay_wgrad_compute": "true", "model.add_bias_linear": "true"}),
            ("delay_wgrad_te29", {ep + "overlap_moe_expert_parallel_comm": "true", ep + "delay_wgrad_compute": "true", "te_version": "2.9.0"}),
            ("delay_wgrad_te26", {ep + "overlap_moe_expert_parallel_comm": "true", ep + "delay_wgrad_compute": "true", "te_version": "2.6.0"}),
            ("ep_overlap_full_rec", {ep + "overlap_moe_expert_parallel_comm": "true", "model.recompute_granularity": "full",
                                     "model.recompute_method": "uniform", "model.recompute_num_layers": "1"}),
            ("ep_overlap_mtp2", {ep + "overlap_moe_expert_parallel_comm": "true", "model.mtp_num_layers": "2"}),
            ("ep_overlap_ep1", {ep + "overlap_moe_expert_parallel_comm": "true", "model.expert_model_parallel_size": "1"}),
            ("ep_overlap_shared", {ep + "overlap_moe_expert_parallel_comm": "true", "model.moe_shared_expert_overlap": "true"}),
            ("rank_capacity", {"model.moe_expert_rank_capacity_factor": "1.0"}),
            ("rank_capacity_fuser", {"model.moe_expert_rank_capacity_factor": "1.0", "model.moe_flex_dispatcher_backend": "hybridep",
                                     "model.use_transformer_engine_op_fuser": "true"}),
        ]
    return [(n, s) for n, s in t if all(k in info["settable"] for k in s)]


def settings_for_toggle(name, settings, info):
    """The graph settings a toggle is checked with: the recipe's own, none,
    a full-iteration graph and the per-layer scopes a model of this kind
    captures; local per-layer graphs too where the release takes them
    (info["local_per_layer"]: MB 0.6+ refuses impl local but for a
    full-iteration graph, whatever else is set)."""
    per_layer = [(TE, ["attn"]), (TE, ["moe_router", "moe_preprocess"] if info["moe"] else ["mlp"])]
    if info["moe"]:
        per_layer.append((TE, ["moe"]))
    if info.get("local_per_layer"):
        per_layer += [(LOCAL, None), (LOCAL, ["attn"])]
    wanted = [(None, None), (NONE, None), (LOCAL, ["full_iteration"])] + per_layer
    return [g for g in wanted if g in settings]


def make_cases(info):
    """The cases of one layout: every graph setting at warm-ups 3 and 0
    without a toggle, then each toggle with settings_for_toggle at warm-up
    3. Returned as (toggle, impl, scopes, warmup, set)."""
    out = []
    gs = graph_settings(info)
    for impl, scopes in gs:
        for w in (3, 0):
            if w == 0 and not warmup0_ok(impl, info):
                continue
            out.append(("", impl, scopes, w, {}))
    for name, sets in toggles(info):
        for impl, scopes in settings_for_toggle(name, gs, info):
            out.append((name, impl, scopes, 3, dict(sets)))
    return out


def warmup0_ok(impl, info):
    """Whether a warm-up of 0 stays within what the harness runs: with
    none, TE graphs are captured in the first iteration, and MB's training
    loop then asserts graphs were made on every pipeline rank (train.py),
    a run-time check the harness cannot reach without a GPU."""
    return impl in (NONE, LOCAL, "full_iteration") or (impl is None and info["impl"] != TE)


# --- the corpus ---------------------------------------------------------------

# The fields that make a case: what `cgtune check` is given (the base
# stands for the layout's recipe).
CASE_KEYS = ("model", "base", "impl", "scopes", "warmup", "set")


def unique_cases(cases):
    """cases without repeats: layouts of one model on several GPU types
    often have the same recipe settings, and then the same cases; the
    first (its GPU type) is kept."""
    seen, out = set(), []
    for c in cases:
        key = json.dumps([c[k] for k in CASE_KEYS], sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out



def corpus_line(case):
    return json.dumps(case, separators=(",", ":"), sort_keys=True)


def write_corpus(path, cases):
    """Write cases one a line, compact JSON, gzip'ed when path ends in .gz
    (mtime 0: the same cases give the same bytes)."""
    text = "".join(corpus_line(c) + "\n" for c in cases).encode()
    tmp = path + ".tmp"
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(tmp, "wb") as f:
        if path.endswith(".gz"):
            with gzip.GzipFile(filename="", mode="wb", fileobj=f, mtime=0, compresslevel=9) as g:
                g.write(text)
        else:
            f.write(text)
    os.replace(tmp, path)


def read_corpus(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def summary(cases):
    """The harness's summary: cases, accepted, and the rejections by the
    code that raised them and their message."""
    out = io.StringIO()
    acc = sum(1 for c in cases if c["accept"])
    out.write(f"{len(cases)} cases, {acc} accepted, {len(cases) - acc} rejected\n")
    by = Counter((c["raised_by"], c["message"]) for c in cases if not c["accept"])
    for (where, msg), n in sorted(by.items(), key=lambda kv: (-kv[1], kv[0])):
        short = msg if len(msg) <= 100 else msg[:97] + "..."
        out.write(f"{n:6d}  {where}: {short}\n")
    return out.getvalue()
