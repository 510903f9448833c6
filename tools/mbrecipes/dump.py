"""Run Megatron-Bridge's perf-recipe functions in the sandbox and record
what they return, for cgtune's built-in model generator.

    python3 tools/mbrecipes/dump.py --mb 067f987 --mb-repo MB.git --mcore-repo MLM.git

executes every function of src/megatron/bridge/perf_recipes/<family>/<gpu>/
<model>.py of the LLM families, records in <out>/index.yaml each pretraining
recipe with whether Megatron-Core accepts its parallel layout on its GPU
count and which one the layout selection picks per GPU type, and writes the
picked ones' ConfigContainer as MB's own ConfigContainer.to_yaml writes it,
trimmed to the keys cgtune reads (mbconfig/keys.txt), one file per recipe.

    python3 tools/mbrecipes/dump.py ... --to-yaml MODULE:FUNCTION --out FILE

writes one recipe's whole ConfigContainer with MB's to_yaml (any recipe
function, a library one under megatron.bridge.recipes included).
"""

import argparse
import contextlib
import glob
import importlib
import io
import logging
import os
import sys
import tempfile
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # tools/, for mbsandbox
sys.path.insert(0, HERE)

import mbsandbox  # noqa: E402
import recipes  # noqa: E402

DEFAULT_OUT = "presets/testdata/mbrecipes"
KEYS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "mbconfig", "keys.txt")
HEADER = "# Megatron-Bridge recipe dump for cgtune, written by tools/mbrecipes/dump.py; do not edit."
PERF_ROOT = "src/megatron/bridge/perf_recipes"


def quiet():
    """Recipe functions log and print; the dump's output is its files."""
    logging.disable(logging.CRITICAL)
    warnings.simplefilter("ignore")
    return contextlib.redirect_stdout(io.StringIO())


def perf_modules(trees):
    """(module name, repository path) of every perf-recipe file of an LLM family."""
    out = []
    for path in sorted(glob.glob(os.path.join(trees.mb_root, PERF_ROOT, "*", "*", "*.py"))):
        rel = os.path.relpath(path, trees.mb_root)
        family = rel.split("/")[-3]
        if family in recipes.EXCLUDED_FAMILIES or rel.endswith("__init__.py"):
            continue
        out.append((os.path.relpath(path, os.path.join(trees.mb_root, "src"))[:-3].replace("/", "."), rel))
    return out


def model_section(d):
    """The model's fields: MB's GPTModelConfig keeps the TransformerConfig
    under model.transformer."""
    m = d.get("model") or {}
    return {**m, **(m.get("transformer") or {})}


def model_extras(model):
    """Attributes a recipe set on its model that are not fields of the
    model's dataclass, so to_dict leaves them out: MB's DeepSeek-V4 bridge
    sets csa_*, o_groups, ... that the Megatron-Core MB pins has no field
    for. Plain values only; the dump keeps those cgtune reads."""
    import dataclasses

    if not dataclasses.is_dataclass(model):
        return {}
    fields = {f.name for f in dataclasses.fields(model)}
    return {
        k: v
        for k, v in vars(model).items()
        if not k.startswith("_") and k not in fields and isinstance(v, (bool, int, float, str, list, type(None)))
        and (not isinstance(v, list) or all(isinstance(x, (bool, int, float, str)) for x in v))
    }


def layout_sizes(d):
    m = model_section(d)
    return dict(
        tp=m.get("tensor_model_parallel_size"),
        pp=m.get("pipeline_model_parallel_size"),
        cp=m.get("context_parallel_size"),
        ep=m.get("expert_model_parallel_size"),
        etp=m.get("expert_tensor_parallel_size"),
        vp=m.get("virtual_pipeline_model_parallel_size"),
        gbs=d["train"]["global_batch_size"],
        mbs=d["train"]["micro_batch_size"],
    )


def run_recipe(fn, hf):
    """Run one recipe function: its ConfigContainer.to_dict() with the
    model attributes to_dict leaves out (model_extras), and the
    HuggingFace configs it loaded."""
    hf.loaded.clear()
    with quiet():
        cfg = fn()
        d = cfg.to_dict()
    loaded = sorted(set(hf.loaded))
    extra = model_extras(cfg.model)
    if extra:
        d["model"].update(extra)
    return d, loaded


def run_perf_recipes(trees, hf):
    """Every pretraining perf recipe of the LLM families, run: dicts with
    name, file, config (ConfigContainer.to_dict()), accepted, reason, and
    hf, the HuggingFace configs the recipe loaded."""
    out = []
    for module, rel in perf_modules(trees):
        with quiet():
            mod = importlib.import_module(module)
        for fn_name in sorted(dir(mod)):
            fn = getattr(mod, fn_name)
            name = recipes.parse_name(fn_name)
            if name is None or name.task != "pretrain" or getattr(fn, "__module__", None) != module:
                continue
            d, loaded = run_recipe(fn, hf)
            ok, reason = recipes.accepts(name.num_gpus, **layout_sizes(d))
            out.append({"name": name, "file": rel, "module": module, "config": d, "accepted": ok, "reason": reason, "hf": loaded})
    return out


def tokenizer_vocab(d, hf):
    """The vocabulary a recipe leaves to its HuggingFace tokenizer (model
    vocab_size null): the published config's vocab_size, with its source."""
    if model_section(d).get("vocab_size") is not None:
        return None
    tok = (d.get("tokenizer") or {}).get("tokenizer_model")
    if not tok or tok not in hf.entries:
        return None
    return {"size": hf.entries[tok]["config"]["vocab_size"], "source": f"{hf.source(tok)} (vocab_size)"}


def yaml_module():
    import yaml  # PyYAML: MB's to_yaml writes through it

    return yaml


def dump_text(yaml, data):
    """data as MB's ConfigContainer.to_yaml writes it: PyYAML's safe_dump
    with MCore's representers (megatron/training/config/yaml_utils.py)."""
    from megatron.training.config.yaml_utils import safe_yaml_representers

    with safe_yaml_representers():
        return yaml.safe_dump(data, default_flow_style=False)


def write_atomic(path, text):
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=d)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def index_entry(r, chosen, vocab, hf):
    n = r["name"]
    e = {
        "function": n.function,
        "file": r["file"],
        "model": n.model,
        "gpu": n.gpu,
        "num_gpus": n.num_gpus,
        "precision": n.precision,
        "variant": n.variant,
        "accepted": r["accepted"],
    }
    if r["reason"]:
        e["reason"] = r["reason"]
    if n.excluded_variant:
        e["excluded"] = "a " + n.variant + " variant"
    if chosen:
        e["selected"] = True
        e["dump"] = n.function + ".yaml"
        if r["hf"]:
            e["hf_configs"] = [{"model": m, "source": hf.source(m)} for m in r["hf"]]
        if vocab:
            e["tokenizer_vocab"] = vocab
    return e


def write_dumps(trees, out, keys):
    yaml = yaml_module()
    hf = sys.modules["transformers"].hf_configs
    runs = run_perf_recipes(trees, hf)
    chosen = {id(r) for r in recipes.select(runs).values()}
    written, entries = set(), []
    for r in runs:
        sel = id(r) in chosen
        vocab = tokenizer_vocab(r["config"], hf) if sel else None
        entries.append(index_entry(r, sel, vocab, hf))
        if not sel:
            continue
        head = [
            HEADER,
            f"# mb_commit: {trees.mb_commit}",
            f"# mcore_commit: {trees.mcore_commit}",
            f"# file: {r['file']}",
            f"# function: {r['name'].function}",
            "# The ConfigContainer the function returns, as MB's ConfigContainer.to_yaml writes it,",
            "# trimmed to the keys cgtune reads (mbconfig/keys.txt); model attributes the recipe sets",
            "# that are not fields of the model's dataclass (to_yaml leaves them out) are under model:.",
        ]
        fname = r["name"].function + ".yaml"
        write_atomic(os.path.join(out, fname), "\n".join(head) + "\n" + dump_text(yaml, recipes.trim(r["config"], keys)))
        written.add(fname)
    index = {"mb_commit": trees.mb_commit, "mcore_commit": trees.mcore_commit, "recipes": entries}
    text = HEADER + "\n# Every LLM pretraining perf recipe; selected marks each GPU type's layout.\n"
    write_atomic(os.path.join(out, "index.yaml"), text + yaml.safe_dump(index, default_flow_style=False, sort_keys=False))
    for path in glob.glob(os.path.join(out, "*.yaml")):
        name = os.path.basename(path)
        if name not in written and name != "index.yaml" and _ours(path):
            os.unlink(path)  # a dump of a recipe no longer selected
    return entries


def _ours(path, header=HEADER):
    """Whether path is a file this tool wrote (its first line is header)."""
    with open(path, encoding="utf-8") as f:
        return f.readline().rstrip("\n") == header


def to_yaml(target, path):
    """Run MODULE:FUNCTION and write its ConfigContainer with MB's to_yaml."""
    module, _, fn = target.partition(":")
    if not module or not fn:
        raise SystemExit(f"dump: --to-yaml {target!r}: want MODULE:FUNCTION")
    with quiet():
        cfg = getattr(importlib.import_module(module), fn)()
    tmp = path + ".tmp"
    cfg.to_yaml(tmp)
    os.replace(tmp, path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mbsandbox.add_repo_args(parser)
    parser.add_argument("--out", default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT}), or the file of --to-yaml")
    parser.add_argument("--keys", default=KEYS, help="the keys to keep (default: the ones cgtune's converter reads)")
    parser.add_argument("--to-yaml", metavar="MODULE:FUNCTION", help="write this one recipe's whole ConfigContainer to --out")
    args = parser.parse_args(argv)
    try:
        trees = mbsandbox.trees_from_args(args)
    except mbsandbox.PrepareError as e:
        print(f"dump: {e}", file=sys.stderr)
        return 2
    mbsandbox.activate(trees)
    if args.to_yaml:
        to_yaml(args.to_yaml, args.out)
        print(f"wrote {args.out}")
        return 0
    with open(args.keys, encoding="utf-8") as f:
        keys = recipes.read_keys(f.read())
    entries = write_dumps(trees, args.out, keys)
    sel = sum(1 for e in entries if e.get("selected"))
    print(f"{len(entries)} pretraining recipes, {sum(e['accepted'] for e in entries)} accepted, {sel} selected: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
