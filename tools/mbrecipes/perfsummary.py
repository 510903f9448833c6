"""The pure parts of the published-runs corpus (published.py): reading
Megatron-Bridge's performance-summary tables, naming each row's model, GPU
and precision as the perf recipes name them, and comparing a row with what
a recipe returns. Standard library only; unit-tested by
test_perfsummary.py (./test.sh).

The tables are MB's docs/performance-summary.md and MB's
docs/performance-summary-archive.md: one "## <container> NeMo Container"
section per release, a "### Pre-Training Performance" part, and one
Markdown table per "#### Model: <name>" (or, in the oldest sections,
"#### System: <name>" with a Model column).
"""

import re
from dataclasses import dataclass, field

import recipes

PRETRAINING = "Pre-Training Performance"

# The doc's precision names and the recipe precisions each can be, in the
# order they are tried. The 25.11 tables call current scaling "FP8-CS";
# the newer ones write "FP8", which on H100 is also the sub-channel
# (blockwise) recipe of DeepSeek-V3 and Kimi K2.
DOC_PRECISIONS = {
    "BF16": ("bf16",),
    "FP8": ("fp8cs", "fp8sc", "fp8ds"),
    "FP8-CS": ("fp8cs",),
    "FP8-DS": ("fp8ds",),
    "FP8-SC": ("fp8sc",),
    "MXFP8": ("fp8mx",),
    "FP8-MX": ("fp8mx",),
    "NVFP4": ("nvfp4",),
}

# The row's columns that describe the job, under the names the comparison
# uses. FSDP appears only in the 26.04.01 and older tables.
COLUMNS = {
    "GBS": "gbs",
    "MBS": "mbs",
    "Sequence Length": "seq",
    "TP": "tp",
    "PP": "pp",
    "CP": "cp",
    "VP": "vp",
    "EP": "ep",
    "FSDP": "fsdp",
}

# Parallel sizes MB leaves unset (None) or a table writes "n/a" for: both
# mean 1 (no such parallelism).
_SIZES_DEFAULT_ONE = ("tp", "pp", "cp", "vp", "ep")

_FOOTNOTE = re.compile(r"\[\^[^\]]*\]")


class SummaryError(Exception):
    """A table the parser cannot read (a row with another column count)."""


@dataclass
class Row:
    """One row of a performance table, where it came from and its cells."""

    doc: str
    section: str  # "26.08 NeMo Container"
    part: str  # "Pre-Training Performance"
    heading: str  # "Model: DeepSeekV3"
    line: int  # 1-based line of the row in doc
    columns: dict = field(default_factory=dict)  # header -> cell text, footnote marks removed

    @property
    def model_name(self):
        """The doc's model name: the heading's, else the Model column's."""
        if self.heading.startswith("Model:"):
            return self.heading.split(":", 1)[1].strip()
        return self.columns.get("Model", "")

    @property
    def system(self):
        if self.heading.startswith("System:"):
            return self.heading.split(":", 1)[1].strip()
        return self.columns.get("System", "")


def _cells(line):
    return [_FOOTNOTE.sub("", c).strip() for c in line.strip().strip("|").split("|")]


def _is_separator(line):
    s = line.strip()
    return s.startswith("|") and set(s) <= set("|-: ")


def parse_tables(text, doc):
    """Every table row of a performance-summary document, as Rows."""
    rows = []
    section = part = heading = ""
    header = None
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("#### "):
            heading, header = line[5:].strip(), None
        elif line.startswith("### "):
            part, heading, header = line[4:].strip(), "", None
        elif line.startswith("## "):
            section, part, heading, header = line[3:].strip(), "", "", None
        elif not line.lstrip().startswith("|"):
            header = None
        elif header is None:
            if i + 1 < len(lines) and _is_separator(lines[i + 1]):
                header = _cells(line)
        elif not _is_separator(line):
            cells = _cells(line)
            if len(cells) != len(header):
                raise SummaryError(f"{doc}:{i + 1}: {len(cells)} cells under {len(header)} columns")
            rows.append(Row(doc, section, part, heading, i + 1, dict(zip(header, cells))))
    return rows


def sections(rows):
    """The section names of rows, in document order."""
    out = []
    for r in rows:
        if r.section not in out:
            out.append(r.section)
    return out


def norm_model(name):
    """A model name reduced to lowercase letters and digits, so MB's doc
    names ("LLAMA3.1_405B", "GPT OSS 120B", "DeepSeekV4 Flash") meet the
    perf recipes' ("llama31_405b", "gpt_oss_120b", "deepseek_v4_flash")."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def builtin_model(doc_name, builtins):
    """The built-in model (a perf-recipe model name) the doc's model name
    is, or None. A name with a qualifier in parentheses ("DeepSeekV3 (w/o
    MTP)") is another job than the recipe and is not mapped."""
    if "(" in doc_name:
        return None
    by_norm = {norm_model(b): b for b in builtins}
    return by_norm.get(norm_model(doc_name))


def gpu_type(system):
    """The perf recipes' GPU name of a doc system ("DGX-GB300" -> "gb300")."""
    s = system.strip().lower()
    return s[4:] if s.startswith("dgx-") else s


def _value(cell):
    """A cell as an int, None for n/a; a cell giving alternatives
    ("64 (0)") or any other text is not a value."""
    c = cell.strip().lower()
    if c in ("n/a", "na", "-", ""):
        return None
    if re.fullmatch(r"\d+", c):
        return int(c)
    raise ValueError(cell)


def job(row):
    """The row's job: num_gpus, gpu, precisions (the recipe precisions it
    can be) and the compared fields. Raises ValueError naming the column
    whose cell is not one value."""
    out = {"gpu": gpu_type(row.system)}
    try:
        out["num_gpus"] = _value(row.columns["#-GPUs"])
    except (KeyError, ValueError):
        raise ValueError(f"#-GPUs {row.columns.get('#-GPUs')!r} is not one GPU count") from None
    prec = row.columns.get("Precision", "")
    if prec not in DOC_PRECISIONS:
        raise ValueError(f"Precision {prec!r} is none of {', '.join(DOC_PRECISIONS)}")
    out["precisions"] = DOC_PRECISIONS[prec]
    fields = {}
    for col, key in COLUMNS.items():
        if col not in row.columns:
            continue
        try:
            fields[key] = _value(row.columns[col])
        except ValueError:
            raise ValueError(f"{col} {row.columns[col]!r} is not one value") from None
    out["fields"] = fields
    return out


def recipe_fields(sizes, seq, fsdp):
    """A recipe's compared fields: sizes as dump.layout_sizes returns them,
    its sequence length and whether it runs Megatron-FSDP."""
    return dict(
        gbs=sizes["gbs"], mbs=sizes["mbs"], seq=seq,
        tp=sizes["tp"], pp=sizes["pp"], cp=sizes["cp"], vp=sizes["vp"], ep=sizes["ep"],
        fsdp=bool(fsdp),
    )


def _canon(key, value):
    if key in _SIZES_DEFAULT_ONE and value is None:
        return 1
    return value


def mismatches(row_fields, recipe):
    """The fields where the recipe differs from the row, as
    {field, row, recipe} in COLUMNS order. A table's FSDP is the sharding
    group size, 0 for none: any size > 0 means the recipe runs
    Megatron-FSDP."""
    out = []
    for key in COLUMNS.values():
        if key not in row_fields:
            continue
        want, got = row_fields[key], recipe.get(key)
        if key == "fsdp":
            if want is not None and got != (want > 0):
                out.append({"field": key, "row": want, "recipe": got})
            continue
        if _canon(key, want) != _canon(key, got):
            out.append({"field": key, "row": want, "recipe": got})
    return out


def candidates(model, gpu, num_gpus, precisions, functions):
    """The perf-recipe functions a row can be: the suffix-less pretraining
    recipe of the model, GPU type and count in each of the row's
    precisions, in precisions' order. Suffix-less because MB's perf
    harness runs that one unless told a variant (scripts/performance/
    utils/utils.py, _recipe_function_name)."""
    by_name = {}
    for f in functions:
        n = recipes.parse_name(f)
        if n and n.task == "pretrain" and not n.variant:
            by_name[(n.model, n.gpu, n.num_gpus, n.precision)] = f
    return [by_name[(model, gpu, num_gpus, p)] for p in precisions if (model, gpu, num_gpus, p) in by_name]


def pick(cands, compare):
    """The candidate a row is: the first whose config matches it (compare
    returns its mismatches), else the first; with its mismatches."""
    first = None
    for f in cands:
        diff = compare(f)
        if not diff:
            return f, []
        if first is None:
            first = (f, diff)
    return first
