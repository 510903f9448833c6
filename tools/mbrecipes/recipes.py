"""The pure parts of the recipe dumper: recipe names, which recipes count,
whether Megatron-Core accepts a recipe's parallel layout on its GPU count,
the layout selection, and trimming a dump to the keys cgtune reads.
Standard library only; unit-tested by test_recipes.py (./test.sh).
"""

import re
from dataclasses import dataclass

# Perf-recipe families that are not LLM pretraining: vision-language,
# video diffusion, and GLM-5's fine-tuning-only recipes.
EXCLUDED_FAMILIES = {
    "qwen_vl": "vision-language",
    "wan": "video diffusion",
    "glm_moe_dsa": "fine-tuning only",
}

# Recipe-name suffixes the layout selection leaves out: development
# variants and weak-scaled large-scale runs.
EXCLUDED_VARIANTS = ("dev", "large_scale")

# Compute dtypes of recipe names, in the order the selection falls back to
# when a GPU type has no accepted bf16 recipe.
PRECISIONS = ("bf16", "fp8cs", "fp8ds", "fp8sc", "fp8mx", "nvfp4")

_NAME = re.compile(
    r"^(?P<model>[a-z0-9_]+?)_(?P<task>pretrain|sft|peft)_(?P<num_gpus>\d+)gpu_(?P<gpu>[a-z0-9]+)_"
    r"(?P<precision>" + "|".join(PRECISIONS) + r")(?:_(?P<variant>[a-z0-9_]+?))?_config$"
)


@dataclass(frozen=True)
class RecipeName:
    """What a perf-recipe function's name says about it."""

    function: str
    model: str
    task: str
    num_gpus: int
    gpu: str
    precision: str
    variant: str  # "" for the plain recipe

    @property
    def excluded_variant(self):
        """Whether the variant is one of EXCLUDED_VARIANTS (paged_stash_dev
        is a dev variant)."""
        return any(f"_{v}_" in f"_{self.variant}_" for v in EXCLUDED_VARIANTS)


def parse_name(function):
    """The RecipeName of a perf-recipe function, None when the name does not
    follow <model>_<task>_<N>gpu_<gpu>_<precision>[_<variant>]_config."""
    m = _NAME.match(function)
    if not m:
        return None
    return RecipeName(function, m["model"], m["task"], int(m["num_gpus"]), m["gpu"], m["precision"], m["variant"] or "")


def accepts(num_gpus, tp, pp, cp, ep, etp, vp, gbs, mbs):
    """Whether Megatron-Core accepts this parallel layout on num_gpus GPUs,
    and why not: the checks MCore runs when it builds the process groups and
    the micro-batch calculator (MLM megatron/core/parallel_state.py,
    initialize_model_parallel; megatron/core/num_microbatches_calculator.py,
    ConstantNumMicroBatchesCalculator), in their order, with their messages."""
    tp, pp, cp, ep = tp or 1, pp or 1, cp or 1, ep or 1
    etp = etp or tp
    model_size = tp * pp * cp
    if num_gpus % model_size != 0:
        return False, f"world_size ({num_gpus}) is not divisible by {model_size}"
    dp = num_gpus // model_size
    if vp is not None and vp > 1 and pp <= 1:
        return False, "pipeline-model-parallel size should be greater than 1 with interleaved schedule"
    expert = etp * ep * pp
    if num_gpus % expert != 0:
        return False, (
            f"world_size ({num_gpus}) is not divisible by expert_tensor_model_pipeline_parallel size ({expert})"
        )
    if gbs % (mbs * dp) != 0:
        return False, (
            f"global batch size ({gbs}) is not divisible by micro batch size ({mbs}) times data parallel size ({dp})"
        )
    if gbs // (mbs * dp) < 1:
        return False, f"number of microbatches should be at least 1, got {gbs // (mbs * dp)}."
    return True, ""


def select(recipes):
    """Mark each (model, GPU type)'s layout recipe: the accepted bf16
    pretraining recipe of the smallest GPU count, else the accepted one of
    another precision with the smallest GPU count (ties: PRECISIONS order);
    a plain recipe before a variant of the same count. recipes are dicts
    with name (RecipeName) and accepted; returns {(model, gpu): recipe}."""
    chosen = {}
    for r in recipes:
        n = r["name"]
        if n.task != "pretrain" or n.excluded_variant or not r["accepted"]:
            continue
        key = (n.model, n.gpu)
        rank = (n.precision != "bf16", n.num_gpus, PRECISIONS.index(n.precision), n.variant != "", n.variant)
        if key not in chosen or rank < chosen[key][0]:
            chosen[key] = (rank, r)
    return {k: v[1] for k, v in chosen.items()}


def read_keys(text):
    """The dotted keys of a keys file: one a line, # comments."""
    keys = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            keys.append(line)
    return keys


def _tree(keys):
    """keys as nested dicts; True marks a key kept whole. A key that is
    also the prefix of others (mixed_precision) is a dict: its listed
    sub-keys are kept, and a scalar value passes whole."""
    tree = {}
    for k in keys:
        node, parts = tree, k.split(".")
        for p in parts[:-1]:
            if not isinstance(node.get(p), dict):
                node[p] = {}
            node = node[p]
        node.setdefault(parts[-1], True)
    return tree


def _trim(value, want):
    if want is True or not isinstance(value, dict):
        return value  # a wanted leaf, or a section that is a scalar or null (mixed_precision: bf16_mixed)
    out = {}
    for k, sub in want.items():
        if k in value:
            out[k] = _trim(value[k], sub)
    return out


def trim(config, keys):
    """config (ConfigContainer.to_dict()) cut down to keys. A model key is
    also kept under model.transformer, where MB's GPTModelConfig and
    HybridModelConfig hold the TransformerConfig."""
    tree = _tree(keys)
    out = {}
    for k, sub in tree.items():
        if k in config:
            out[k] = _trim(config[k], sub)
    model = config.get("model")
    if isinstance(model, dict) and isinstance(model.get("transformer"), dict) and isinstance(tree.get("model"), dict):
        out["model"]["transformer"] = _trim(model["transformer"], tree["model"])
    return out
