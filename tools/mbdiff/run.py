"""Differential test of cgtune's rule table: run Megatron-Bridge's and
Megatron-Core's own start-up checks on generated configurations and record
what they say.

    python3 tools/mbdiff/run.py --mb v0.6.0 --mbridge 0.6 \\
        --mb-repo MB.git --mcore-repo MLM.git

For every built-in layout (the recipes the recorded dump selects,
presets/testdata/mbrecipes/index.yaml) whose perf recipe the MB release
has, and every case of cases.make_cases, it builds the configuration as
MB's perf harness builds it, in the tools/mbsandbox sandbox (no torch, no
GPU):

  1. the release's recipe function (perf_recipes/<family>/<gpu>/ from MB
     0.5, scripts/performance/configs/ before), run anew per case;
  2. the case's overrides, as Hydra applies them (attribute by attribute),
     the warm-up among them;
  3. the harness's flags through its own argument parser
     (scripts/performance/argument_parser.py), _set_cuda_graph_overrides
     and the mock dataset (scripts/performance/utils/overrides.py
     set_user_overrides);
  4. runtime_config_update: mixed precision, the comm-overlap setup and
     ConfigContainer.validate, which finalizes the model
     (TransformerConfig.__post_init__);
  5. the model provider's checks (provide() up to building the model,
     which needs torch: an exception other than AssertionError/ValueError
     there means the checks passed);

and writes recipe/testdata/differential/mb-<mbridge>.jsonl.gz, one case a
line (cases.py), then prints the summary. docs/differential.md says what
the harness leaves out and why.
"""

import argparse
import contextlib
import importlib
import io
import logging
import os
import sys
import traceback
import types
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))  # tools/, for mbsandbox
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "mbrecipes"))
sys.path.insert(0, HERE)

import cases  # noqa: E402
import mbsandbox  # noqa: E402
import recipes  # noqa: E402  (tools/mbrecipes: perf-recipe names)

INDEX = os.path.join(ROOT, "presets", "testdata", "mbrecipes", "index.yaml")
OUT = os.path.join(ROOT, "recipe", "testdata", "differential")


class ArgparseError(Exception):
    """argparse's error(): the message it prints before exiting 2."""


class DeviceUnknown(Exception):
    """The recipe read the GPU's properties, and none are recorded for it."""


def quiet():
    logging.disable(logging.CRITICAL)
    warnings.simplefilter("ignore")
    return contextlib.redirect_stdout(io.StringIO())


# torch.cuda.get_device_properties(0) as each GPU type reports it: MB
# picks the flex dispatcher's backend by the device (training/
# flex_dispatcher_backend.py apply_flex_dispatcher_backend). Major.minor is
# the compute capability NVIDIA publishes for the GPU (CUDA GPUs list);
# the names are what the driver reports. Rubin (r100, vr200) has none
# published: a recipe that reads the device there is left out.
DEVICES = {
    "h100": ("NVIDIA H100 80GB HBM3", 9, 0),
    "b200": ("NVIDIA B200", 10, 0),
    "gb200": ("NVIDIA GB200", 10, 0),
    "b300": ("NVIDIA B300 SXM6 AC", 10, 3),
    "gb300": ("NVIDIA GB300", 10, 3),
}


class _UnknownDevice:
    def __init__(self, gpu):
        self.gpu = gpu

    def __getattr__(self, name):
        raise DeviceUnknown(f"the recipe reads the GPU's {name}, and no compute capability is recorded for {self.gpu}")


def install_device(gpu):
    """Make torch.cuda report gpu, as on a node of that GPU type."""
    import torch

    if gpu in DEVICES:
        name, major, minor = DEVICES[gpu]
        props = types.SimpleNamespace(name=name, major=major, minor=minor, total_memory=80 << 30, multi_processor_count=132)
    else:
        props = _UnknownDevice(gpu)
    torch.cuda.is_available = lambda: True
    torch.cuda.get_device_properties = lambda *a, **k: props
    torch.cuda.get_device_capability = lambda *a, **k: (props.major, props.minor)
    torch.cuda.get_device_name = lambda *a, **k: props.name


class Release:
    """One MB release activated in the sandbox: where its recipes are and
    how its harness applies flags."""

    def __init__(self, trees, mbridge):
        self.trees = trees
        self.mbridge = mbridge
        perf = os.path.join(trees.mb_root, "scripts", "performance")
        sys.path.insert(0, perf)
        with quiet():
            self.overrides = importlib.import_module("utils.overrides")
            self.datasets = importlib.import_module("utils.datasets")
            self.parser_mod = importlib.import_module("argument_parser")
            self.config = importlib.import_module("megatron.bridge.training.config")
            self.precision = importlib.import_module("megatron.bridge.training.mixed_precision")
            self.mcore_utils = importlib.import_module("megatron.core.utils")
            import transformer_engine
        self.default_te = transformer_engine.__version__
        self.flat = os.path.isdir(os.path.join(trees.mb_root, "src", "megatron", "bridge", "perf_recipes"))

    def builder(self, model, gpu, family, file, function):
        """(build, num_gpus, where) of the release's recipe for a built-in
        layout, or (None, 0, why) when the release has none."""
        name = recipes.parse_name(function)
        if self.flat:
            for path in self._perf_files(file, family, gpu):
                module = os.path.relpath(path, os.path.join(self.trees.mb_root, "src"))[:-3].replace(os.sep, ".")
                with quiet():
                    mod = importlib.import_module(module)
                if hasattr(mod, function):
                    rel = os.path.relpath(path, self.trees.mb_root)
                    return getattr(mod, function), name.num_gpus, f"{rel} {function}"
            return None, 0, f"no {function} in perf_recipes/{family}/{gpu}"
        # Before MB 0.5: scripts/performance/configs/<family>/, one builder
        # per model and GPU type taking the precision (utils.utils
        # get_perf_optimized_recipe).
        utils = importlib.import_module("utils.utils")
        precision = V04_PRECISION.get(name.precision, name.precision)
        try:
            with quiet():
                base = utils.get_workload_base_config(family, model, gpu, precision.upper(), "pretrain", "v1")
        except Exception as e:  # the release has no such workload
            return None, 0, f"no {family}/{model} {gpu} {precision} workload ({e})"

        def build():
            return utils.get_perf_optimized_recipe(family, model, "pretrain", gpu, precision)

        return build, base.num_gpus, f"scripts/performance/configs/{family} {model}_pretrain_config_{gpu}({precision})"

    def _perf_files(self, file, family, gpu):
        first = os.path.join(self.trees.mb_root, file)
        folder = os.path.join(self.trees.mb_root, "src", "megatron", "bridge", "perf_recipes", family, gpu)
        out = [first] if os.path.exists(first) else []
        if os.path.isdir(folder):
            out += sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".py") and f != "__init__.py")
        return out

    def parse_flags(self, gpu, num_gpus, impl, scopes):
        """The perf harness's parsed arguments for the case's flags."""
        parser = self.parser_mod.parse_cli_args()

        def error(message):
            raise ArgparseError(message)

        parser.error = error
        argv = []
        for action in parser._actions:
            if action.required:
                value = {"model_family_name": "llama", "model_recipe_name": "llama3_8b", "num_gpus": str(num_gpus), "gpu": gpu}[action.dest]
                argv += [action.option_strings[0], value]
        if impl is not None:
            argv += ["--cuda_graph_impl", impl]
        if scopes is not None:
            argv += ["--cuda_graph_scope", ",".join(scopes)]
        args, _ = parser.parse_known_args(argv)
        return args

    def set_te_version(self, version):
        te = sys.modules.get("transformer_engine") or importlib.import_module("transformer_engine")
        te.__version__ = version
        self.mcore_utils._te_version = None  # get_te_version() caches it

    def mock_dataset(self, cfg):
        """The dataset the harness runs an LLM recipe on by default (--data
        mock): set_user_overrides replaces the recipe's."""
        cfg.dataset = self.datasets.create_mock_dataset_config(
            seq_length=cfg.model.seq_length,
            num_workers=cfg.dataset.num_workers,
            pin_memory=cfg.dataset.pin_memory,
            persistent_workers=cfg.dataset.persistent_workers,
        )

    def apply_precision(self, cfg):
        """runtime_config_update's first step: the recipe's mixed-precision
        config written onto the model, optimizer and DDP configs."""
        mp = cfg.mixed_precision
        if mp is None:
            return
        if isinstance(mp, str):
            mp = self.precision.get_mixed_precision_config(mp)
        mp.finalize()
        mp.setup(cfg.model, cfg.optimizer, cfg.ddp)


# MB v0.4's precision names (scripts/performance/utils/precision.py) for
# the precision part of a perf-recipe name.
V04_PRECISION = {"bf16": "bf16", "fp8cs": "fp8_cs", "fp8mx": "fp8_mx", "fp8ds": "fp8_ds", "fp8sc": "fp8_sc", "nvfp4": "nvfp4"}


# --- reading and writing config values by cgtune key --------------------------


def _resolve(cfg, key):
    """(object, attribute) that key names in cfg; dict entries by key."""
    parts = key.split(".")
    obj = cfg
    for p in parts[:-1]:
        obj = obj.get(p) if isinstance(obj, dict) else getattr(obj, p)
        if obj is None:
            raise KeyError(key)
    return obj, parts[-1]


_MISSING = object()


def read_value(cfg, key):
    """The value of cgtune key in cfg, _MISSING where cfg has no such field."""
    if key.startswith("env."):
        env = getattr(cfg, "env_vars", None)
        if env is None:
            return _MISSING
        return env.get(key[4:])
    try:
        obj, attr = _resolve(cfg, key)
    except (KeyError, AttributeError):
        return _MISSING
    if isinstance(obj, dict):
        return obj.get(attr, _MISSING)
    if not hasattr(obj, attr):
        return _MISSING
    return getattr(obj, attr)


def write_value(release, cfg, key, text):
    """Apply one case override key=text to cfg as a Hydra override would."""
    value = cases.hydra_value(text)
    if key == "te_version":
        release.set_te_version(text)
        return
    if key.startswith("env."):
        if value is None:
            cfg.env_vars.pop(key[4:], None)
        else:
            cfg.env_vars[key[4:]] = text
        return
    obj, attr = _resolve(cfg, key)
    if isinstance(obj, dict):
        obj[attr] = value
    else:
        if not hasattr(obj, attr):
            raise AttributeError(f"{type(obj).__name__} has no field {attr}")
        setattr(obj, attr, value)


def base_of(release, cfg, keys):
    """The recipe's values of keys, --set spelling (fields it lacks left
    out), as MB starts from them: on the harness's dataset, with the
    recipe's mixed precision written onto the model (runtime_config_update
    does that before any check; cgtune's layout precision stands for it).
    cfg is changed."""
    release.mock_dataset(cfg)
    release.apply_precision(cfg)
    out = {}
    for k in keys:
        v = read_value(cfg, k)
        if v is _MISSING:
            continue
        t = cases.set_text(v)
        if t is not None:
            out[k] = t
    return out


def layout_info(release, cfg, base):
    experts = base.get("model.num_moe_experts", "null")
    settable = {k for k in cases.load_keys() if read_value(cfg, k) is not _MISSING}
    settable.add("te_version")
    if cfg.comm_overlap is None:
        settable -= {"comm_overlap.overlap_moe_expert_parallel_comm", "comm_overlap.delay_wgrad_compute"}
    return {
        "moe": experts not in ("null", "1"),
        "comm_overlap": cfg.comm_overlap is not None,
        "impl": base.get("model.cuda_graph_impl"),
        "settable": settable,
    }


# --- one case ---------------------------------------------------------------


def raised_by(release, exc):
    """file:function of the innermost frame of MB's or MCore's code."""
    tb = traceback.extract_tb(exc.__traceback__)
    for frame in reversed(tb):
        for root in (release.trees.mb_root, release.trees.mcore_root):
            if frame.filename.startswith(root + os.sep):
                rel = os.path.relpath(frame.filename, root)
                return f"{rel.replace(os.sep, '/')}:{frame.name}"
    return f"{os.path.basename(tb[-1].filename)}:{tb[-1].name}" if tb else type(exc).__name__


def run_case(release, build, gpu, num_gpus, impl, scopes, warmup, sets):
    """(accept, message, raised_by) of one case as MB's perf harness starts
    it; DeviceUnknown when the case reads the GPU's properties and none are
    recorded."""
    env = dict(os.environ)
    release.set_te_version(release.default_te)
    try:
        with quiet():
            cfg = build()
        for k in sorted(sets):
            write_value(release, cfg, k, sets[k])
        cfg.model.cuda_graph_warmup_steps = warmup
        try:
            args = release.parse_flags(gpu, num_gpus, impl, scopes)
        except ArgparseError as e:
            fn = str(e).split("invalid ", 1)[-1].split(" value", 1)[0]
            return False, str(e), f"scripts/performance/argument_parser.py:{fn}"
        os.environ["WORLD_SIZE"], os.environ["RANK"] = str(num_gpus), "0"
        try:
            with quiet():
                release.overrides._set_cuda_graph_overrides(cfg, cuda_graph_impl=args.cuda_graph_impl, cuda_graph_scope=args.cuda_graph_scope)
                release.mock_dataset(cfg)
                release.config.runtime_config_update(cfg)
        except DeviceUnknown:
            raise
        except Exception as e:
            return False, str(e) or type(e).__name__, raised_by(release, e)
        return provide_checks(release, cfg) or (True, "", "")
    finally:
        os.environ.clear()
        os.environ.update(env)


# MB's files whose checks provide() makes before it builds the model: the
# providers themselves and MB's CUDA-graph validation they call.
PROVIDER_CHECKS = ("src/megatron/bridge/models/", "src/megatron/bridge/utils/cuda_graph.py")


def provide_checks(release, cfg):
    """The model provider's checks, as setup() reaches them: with the
    vocabulary size setup() takes from the tokenizer (training/setup.py;
    no rule reads it), provide() runs until it builds the model, which
    needs torch and parallel state. A failure raised from a provider's own
    file or MB's CUDA-graph validation is a check; one from deeper (MCore's
    parallel_state, a stubbed module) is past them."""
    if getattr(cfg.model, "vocab_size", 0) is None:
        cfg.model.vocab_size = 32000
    try:
        with quiet():
            cfg.model.provide()
    except (AssertionError, ValueError) as e:
        by = raised_by(release, e)
        if by.startswith(PROVIDER_CHECKS):
            return False, str(e) or type(e).__name__, by
    except Exception:
        pass
    return None


# --- the run ----------------------------------------------------------------


def index_layouts(path):
    """The built-in layouts of the recorded recipe dump (cases.read_index)."""
    with open(path, encoding="utf-8") as f:
        return cases.read_index(f.read())


def layout_cases(release, keys, model, gpu, family, file, function):
    """The corpus lines of one layout, or (None, why) when the release
    has no such recipe or its stock recipe fails."""
    install_device(gpu)
    build, num_gpus, where = release.builder(model, gpu, family, file, function)
    if build is None:
        return None, where
    try:
        with quiet():
            cfg = build()
        base = base_of(release, cfg, keys)
        warmup = int(base.get("model.cuda_graph_warmup_steps", "3"))
        ok, msg, by = run_case(release, build, gpu, num_gpus, None, None, warmup, {})
        local_per_layer = run_case(release, build, gpu, num_gpus, cases.LOCAL, ["attn"], warmup, {})[0]
    except DeviceUnknown as e:
        return None, str(e)
    if not ok:
        return None, f"the stock recipe fails: {by}: {msg}"
    out = []
    info = layout_info(release, cfg, base)
    info["local_per_layer"] = local_per_layer
    for toggle, impl, scopes, warmup, sets in cases.make_cases(info):
        try:
            accept, message, by = run_case(release, build, gpu, num_gpus, impl, scopes, warmup, sets)
        except DeviceUnknown:
            continue
        out.append({
            "model": model, "gpu": gpu, "mbridge": release.mbridge, "recipe": where,
            "impl": impl, "scopes": scopes, "warmup": warmup, "set": sets, "base": base,
            "toggle": toggle, "accept": accept, "message": message, "raised_by": by,
        })
    return out, where


def run(release, layouts, only=None, log=sys.stderr):
    """Every case of every layout (models in only, when given), without
    repeats; and the layouts left out, with why."""
    keys = cases.load_keys()
    out, skipped = [], []
    for model, gpu, family, file, function in layouts:
        if only and model not in only:
            continue
        got, where = layout_cases(release, keys, model, gpu, family, file, function)
        if got is None:
            skipped.append(f"{model} {gpu}: {where}")
            continue
        out += got
        print(f"{model} {gpu}: {len(got)} cases ({where})", file=log)
    return cases.unique_cases(out), skipped


def numpy_free():
    """MCore's dataset config normalises its split weights with numpy
    (megatron/core/datasets/utils.py normalize), which the sandbox stubs:
    the same sum-to-one in Python."""
    import megatron.core.datasets.utils as u

    u.normalize = lambda weights: [float(w) / sum(float(x) for x in weights) for w in weights]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mbsandbox.add_repo_args(parser)
    parser.add_argument("--mbridge", required=True, help="cgtune's --mbridge for this release (0.4, 0.6, 0.7)")
    parser.add_argument("--out", help="corpus file (default recipe/testdata/differential/mb-<mbridge>.jsonl.gz)")
    parser.add_argument("--index", default=INDEX, help="the recorded recipe dump's index (default presets/testdata/mbrecipes/index.yaml)")
    parser.add_argument("--model", action="append", help="only this model (repeatable)")
    args = parser.parse_args(argv)
    try:
        trees = mbsandbox.trees_from_args(args)
        layouts = index_layouts(args.index)
    except (mbsandbox.PrepareError, OSError, ValueError) as e:
        print(f"mbdiff: {e}", file=sys.stderr)
        return 2
    mbsandbox.activate(trees)
    numpy_free()
    release = Release(trees, args.mbridge)
    corpus, skipped = run(release, layouts, only=args.model)
    out = args.out or os.path.join(OUT, f"mb-{args.mbridge}.jsonl.gz")
    cases.write_corpus(out, corpus)
    for s in skipped:
        print(f"left out {s}", file=sys.stderr)
    print(f"MB {args.mb} ({trees.mb_commit[:12]}, MCore {trees.mcore_commit[:12]}, TE {release.default_te}): {out}")
    print(cases.summary(corpus), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
