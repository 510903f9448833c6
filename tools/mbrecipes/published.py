"""Record the pre-training runs Megatron-Bridge publishes, with the perf
recipe each one is, for cgtune's check of its memory model against jobs
that ran.

    python3 tools/mbrecipes/published.py --mb 067f987 --mb-repo MB.git --mcore-repo MLM.git

reads the pre-training tables of MB's docs/performance-summary.md (every
section) and of MB's docs/performance-summary-archive.md (the sections
named by --archive-section) at the commit, maps each row to a built-in model
(presets/models), finds the suffix-less perf recipe of its model, GPU type,
GPU count and precision, runs it in the tools/mbsandbox sandbox, and
records whether what the recipe returns matches the row (GBS, MBS,
sequence length, TP, PP, CP, VP, EP, and FSDP where the table has it),
field by field. It writes <out>/index.yaml (every row, where it came from,
its columns, its recipe and the match) and the matching recipes' trimmed
ConfigContainer dumps, as tools/mbrecipes/dump.py writes them.
"""

import argparse
import glob
import importlib
import os
import posixpath
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # tools/, for mbsandbox
sys.path.insert(0, HERE)

import dump  # noqa: E402
import mbsandbox  # noqa: E402
import perfsummary  # noqa: E402
import recipes  # noqa: E402

DEFAULT_OUT = "presets/testdata/published"
MODELS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "presets", "models")
# MB's performance summary and its archive, in MB's tree.
SUMMARY = posixpath.join("docs", "performance-summary.md")
ARCHIVE = posixpath.join("docs", "performance-summary-archive.md")
DEFAULT_ARCHIVE_SECTIONS = ("26.06.01 NeMo Container", "26.06 NeMo Container")
HEADER = "# Megatron-Bridge published-run recipe dump for cgtune, written by tools/mbrecipes/published.py; do not edit."


class InputError(Exception):
    """Bad input: a section that is not in the document, no built-in models."""


def git_show(repo, commit, path):
    try:
        out = subprocess.run(["git", "-C", repo, "show", f"{commit}:{path}"], check=True, capture_output=True)
    except subprocess.CalledProcessError as e:
        msg = e.stderr.decode(errors="replace").strip().splitlines()
        raise InputError(f"git show {commit[:12]}:{path}: {msg[-1] if msg else 'failed'}") from e
    return out.stdout.decode()


def builtin_models(folder):
    """cgtune's built-in model names: one generated file per model."""
    names = sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(folder, "*.yaml")))
    if not names:
        raise InputError(f"{folder}: no built-in model files (*.yaml)")
    return names


def pick_section(name, available, doc):
    """The archive section name matches: itself or "<name> NeMo Container"."""
    for want in (name, name + " NeMo Container"):
        if want in available:
            return want
    raise InputError(f"{doc}: --archive-section {name!r} is no section (allowed: {', '.join(available)})")


def published_rows(repo, commit, archive_sections):
    """The pre-training rows of the summary's every section and of the
    archive's named sections."""
    rows = perfsummary.parse_tables(git_show(repo, commit, SUMMARY), SUMMARY)
    arch = perfsummary.parse_tables(git_show(repo, commit, ARCHIVE), ARCHIVE)
    available = perfsummary.sections(arch)
    keep = {pick_section(s, available, ARCHIVE) for s in archive_sections}
    rows += [r for r in arch if r.section in keep]
    return [r for r in rows if r.part == perfsummary.PRETRAINING]


def perf_functions(trees):
    """{function name: (module, repository file)} of every perf recipe."""
    out = {}
    for module, rel in dump.perf_modules(trees):
        with dump.quiet():
            mod = importlib.import_module(module)
        for name in dir(mod):
            fn = getattr(mod, name)
            if recipes.parse_name(name) and getattr(fn, "__module__", None) == module:
                out[name] = (module, rel)
    return out


class RecipeRuns:
    """Each perf recipe run at most once, with its compared fields."""

    def __init__(self, functions, hf):
        self.functions, self.hf, self.runs = functions, hf, {}

    def get(self, name):
        if name not in self.runs:
            module, _ = self.functions[name]
            d, loaded = dump.run_recipe(getattr(importlib.import_module(module), name), self.hf)
            m = dump.model_section(d)
            seq = m.get("seq_length") or (d.get("dataset") or {}).get("seq_length")
            fsdp = (d.get("ddp") or {}).get("use_megatron_fsdp")
            self.runs[name] = (d, loaded, perfsummary.recipe_fields(dump.layout_sizes(d), seq, fsdp))
        return self.runs[name]


def row_entry(row, builtins, functions, runs):
    """The index entry of one row: where it came from, its columns, and its
    recipe with the match, or why it has none."""
    e = {"doc": row.doc, "section": row.section, "table": row.heading, "line": row.line, "columns": row.columns}
    model = perfsummary.builtin_model(row.model_name, builtins)
    if model is None:
        e["skipped"] = f"{row.model_name!r} is no built-in model"
        return e
    try:
        job = perfsummary.job(row)
    except ValueError as err:
        e["skipped"] = str(err)
        return e
    e.update(model=model, gpu=job["gpu"], num_gpus=job["num_gpus"])
    cands = perfsummary.candidates(model, job["gpu"], job["num_gpus"], job["precisions"], functions)
    if not cands:
        want = "|".join(job["precisions"])
        e["skipped"] = f"no perf recipe {model}_pretrain_{job['num_gpus']}gpu_{job['gpu']}_({want})_config"
        return e
    fn, diff = perfsummary.pick(cands, lambda f: perfsummary.mismatches(job["fields"], runs.get(f)[2]))
    e.update(function=fn, file=functions[fn][1], match=not diff)
    if len(cands) > 1:
        e["tried"] = cands
    if diff:
        e["mismatches"] = diff
    else:
        e["dump"] = fn + ".yaml"
    return e


def write_corpus(trees, repo, out, keys, builtins, archive_sections):
    yaml = dump.yaml_module()
    rows = published_rows(repo, trees.mb_commit, archive_sections)
    hf = sys.modules["transformers"].hf_configs
    functions = perf_functions(trees)
    runs = RecipeRuns(functions, hf)
    entries = [row_entry(r, builtins, functions, runs) for r in rows]
    written = set()
    for e in entries:
        if not e.get("match"):
            continue
        d, loaded, _ = runs.get(e["function"])
        vocab = dump.tokenizer_vocab(d, hf)
        if vocab:
            e["tokenizer_vocab"] = vocab
        if loaded:
            e["hf_configs"] = [{"model": m, "source": hf.source(m)} for m in loaded]
        if e["dump"] in written:
            continue
        head = [
            HEADER,
            f"# mb_commit: {trees.mb_commit}",
            f"# mcore_commit: {trees.mcore_commit}",
            f"# file: {e['file']}",
            f"# function: {e['function']}",
            "# The ConfigContainer the function returns, as MB's ConfigContainer.to_yaml writes it,",
            "# trimmed to the keys cgtune reads (mbconfig/keys.txt); model attributes the recipe sets",
            "# that are not fields of the model's dataclass (to_yaml leaves them out) are under model:.",
        ]
        text = "\n".join(head) + "\n" + dump.dump_text(yaml, recipes.trim(d, keys))
        dump.write_atomic(os.path.join(out, e["dump"]), text)
        written.add(e["dump"])
    index = {
        "mb_commit": trees.mb_commit,
        "mcore_commit": trees.mcore_commit,
        "docs": [{"doc": SUMMARY, "sections": perfsummary.sections([r for r in rows if r.doc == SUMMARY])},
                 {"doc": ARCHIVE, "sections": perfsummary.sections([r for r in rows if r.doc == ARCHIVE])}],
        "rows": entries,
    }
    text = HEADER + "\n# Every pre-training row of the tables named under docs; match marks a row its recipe returns.\n"
    dump.write_atomic(os.path.join(out, "index.yaml"), text + yaml.safe_dump(index, default_flow_style=False, sort_keys=False))
    for path in glob.glob(os.path.join(out, "*.yaml")):
        name = os.path.basename(path)
        if name not in written and name != "index.yaml" and dump._ours(path, HEADER):
            os.unlink(path)  # a dump of a recipe no row matches any more
    return entries, written


def summary(entries, written):
    builtin = [e for e in entries if "model" in e]
    with_recipe = [e for e in entries if "function" in e]
    matched = [e for e in entries if e.get("match")]
    return (f"{len(entries)} pre-training rows, {len(builtin)} of built-in models, {len(with_recipe)} with a perf recipe, "
            f"{len(matched)} matching it; {len(written)} recipe dumps")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mbsandbox.add_repo_args(parser)
    parser.add_argument("--out", default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT})")
    parser.add_argument("--keys", default=dump.KEYS, help="the keys to keep (default: the ones cgtune's converter reads)")
    parser.add_argument("--models", default=MODELS, help="folder of cgtune's built-in model files (default presets/models)")
    parser.add_argument("--archive-section", action="append", metavar="NAME",
                        help=f"a section of {ARCHIVE} to read, repeatable (default: {', '.join(DEFAULT_ARCHIVE_SECTIONS)})")
    args = parser.parse_args(argv)
    try:
        trees = mbsandbox.trees_from_args(args)
        builtins = builtin_models(args.models)
        published_rows(args.mb_repo, trees.mb_commit, args.archive_section or DEFAULT_ARCHIVE_SECTIONS)  # bad input before any run
    except (mbsandbox.PrepareError, InputError, perfsummary.SummaryError) as e:
        print(f"published: {e}", file=sys.stderr)
        return 2
    mbsandbox.activate(trees)
    with open(args.keys, encoding="utf-8") as f:
        keys = recipes.read_keys(f.read())
    entries, written = write_corpus(trees, args.mb_repo, args.out, keys, builtins, args.archive_section or DEFAULT_ARCHIVE_SECTIONS)
    print(f"{summary(entries, written)}: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
