"""Unit tests of the published-runs corpus's pure parts (no MB needed): run by ./test.sh."""
import os
import tempfile
import unittest

import perfsummary
import published

# A performance summary in MB's layout: a current section with per-model
# tables (a footnote mark in a throughput cell), an SFT part, and an
# archive-style section with the FSDP column and a per-system table.
DOC = """# Performance

## Nomenclature

- **GBS**: Global Batch Size

## 26.08 NeMo Container

### Pre-Training Performance

#### Model: DeepSeekV3

| System | #-GPUs | Precision | GBS | MBS | Sequence Length | TP | PP | CP | VP | EP | Tokens / sec / GPU |
|--------|--------|-----------|-----|-----|-----------------|----|----|----|----|----|--------------------|
| DGX-GB300 | 256 | MXFP8 | 4096 | 1 | 4096 | 1 | 2 | 1 | 8 | 32 | 6288 |
| DGX-H100 | 1024 | FP8 | 8192 | 1 | 4096 | 2 | 8 | 1 | 4 | 64 | 1297[^note] |

#### Model: LLAMA3.1_405B

| System | #-GPUs | Precision | GBS | MBS | Sequence Length | TP | PP | CP | VP | EP | Tokens / sec / GPU |
|--------|--------|-----------|-----|-----|-----------------|----|----|----|----|----|--------------------|
| DGX-GB200 | 256 | FP8 | 1536 | 1 | 8192 | 4 | 16 | 1 | 4 | n/a | 843 |

### SFT Performance

#### Model: LLAMA3_70B

| System | #-GPUs | Precision | GBS | MBS | Sequence Length | TP | PP | CP | VP | EP | Tokens / sec / GPU |
|--------|--------|-----------|-----|-----|-----------------|----|----|----|----|----|--------------------|
| DGX-GB300 | 32 | FP8 | 32 | 1 | 4096 | 1 | 2 | 1 | 20 | n/a | 4819 |

[^note]: a footnote.

## 26.04 NeMo Container

### Pre-Training Performance

#### Model: LLAMA3_70B

| System | #-GPUs | Precision | GBS | MBS | Sequence Length | FSDP | TP | PP | CP | VP | EP |
|--------|--------|-----------|-----|-----|-----------------|------|----|----|----|----|----|
| DGX-GB300 | 64 | FP8 | 256 | 2 | 8192 | 64 | 1 | 1 | 1 | n/a | n/a |

#### System: DGX-B200

| Model | #-GPUs | Precision | GBS | MBS | Sequence Length | FSDP | TP | PP | CP | VP | EP |
|-------|--------|-----------|-----|-----|-----------------|------|----|----|----|----|----|
| LLAMA3_70B | 64 | FP8-CS (FP8-MX) | 128 | 2 | 8192 | 64 (0) | 1 | 1 | 1 | 1 | 1 |
"""

BUILTINS = ["deepseek_v3", "llama31_405b", "llama3_70b", "gpt_oss_120b", "qwen3_30b_a3b",
            "deepseek_v4_flash", "nemotron_3_5_lightning"]


def line_of(text, needle):
    return next(i + 1 for i, line in enumerate(text.splitlines()) if needle in line)


class ParseTest(unittest.TestCase):
    def test_rows_with_their_section_part_table_and_line(self):
        rows = perfsummary.parse_tables(DOC, "perf.md")
        self.assertEqual(len(rows), 6)
        first = rows[0]
        self.assertEqual((first.doc, first.section, first.part, first.heading), (
            "perf.md", "26.08 NeMo Container", "Pre-Training Performance", "Model: DeepSeekV3"))
        self.assertEqual(first.line, line_of(DOC, "| DGX-GB300 | 256 | MXFP8"))
        self.assertEqual(first.columns["EP"], "32")
        self.assertEqual(first.model_name, "DeepSeekV3")
        self.assertEqual(first.system, "DGX-GB300")
        self.assertEqual(rows[1].columns["Tokens / sec / GPU"], "1297")  # footnote mark removed
        self.assertEqual([r.part for r in rows].count("SFT Performance"), 1)
        self.assertEqual(rows[4].columns["FSDP"], "64")
        # A per-system table names the model in a column and the system in its heading.
        self.assertEqual((rows[5].model_name, rows[5].system), ("LLAMA3_70B", "DGX-B200"))
        self.assertEqual(perfsummary.sections(rows), ["26.08 NeMo Container", "26.04 NeMo Container"])

    def test_a_row_with_another_column_count_is_an_error(self):
        bad = DOC.replace("| DGX-GB300 | 256 | MXFP8 | 4096 | 1 | 4096 | 1 | 2 | 1 | 8 | 32 | 6288 |",
                          "| DGX-GB300 | 256 | MXFP8 | 4096 | 1 | 4096 | 1 | 2 | 1 | 8 | 6288 |")
        with self.assertRaises(perfsummary.SummaryError) as e:
            perfsummary.parse_tables(bad, "perf.md")
        self.assertIn(f"perf.md:{line_of(DOC, '| DGX-GB300 | 256 | MXFP8')}:", str(e.exception))


class NamesTest(unittest.TestCase):
    def test_doc_model_names_meet_the_builtins(self):
        for doc, want in [("DeepSeekV3", "deepseek_v3"), ("LLAMA3.1_405B", "llama31_405b"), ("GPT OSS 120B", "gpt_oss_120b"),
                          ("Qwen3_30B_a3B", "qwen3_30b_a3b"), ("DeepSeekV4 Flash", "deepseek_v4_flash"),
                          ("Nemotron_3_5_Lightning", "nemotron_3_5_lightning"), ("LLAMA3_70B", "llama3_70b"),
                          ("LLAMA3_8B", None), ("DeepSeekV3 (w/o MTP)", None)]:
            self.assertEqual(perfsummary.builtin_model(doc, BUILTINS), want, doc)
        self.assertEqual(perfsummary.gpu_type("DGX-GB300"), "gb300")
        self.assertEqual(perfsummary.gpu_type("DGX-H100"), "h100")

    def test_job_of_a_row(self):
        rows = perfsummary.parse_tables(DOC, "perf.md")
        j = perfsummary.job(rows[2])
        self.assertEqual((j["gpu"], j["num_gpus"], j["precisions"]), ("gb200", 256, ("fp8cs", "fp8sc", "fp8ds")))
        self.assertEqual(j["fields"], {"gbs": 1536, "mbs": 1, "seq": 8192, "tp": 4, "pp": 16, "cp": 1, "vp": 4, "ep": None})
        self.assertEqual(perfsummary.job(rows[0])["precisions"], ("fp8mx",))
        self.assertEqual(perfsummary.job(rows[4])["fields"]["fsdp"], 64)
        with self.assertRaises(ValueError) as e:
            perfsummary.job(rows[5])
        self.assertIn("Precision 'FP8-CS (FP8-MX)'", str(e.exception))
        alt = rows[5]
        alt.columns["Precision"] = "FP8-CS"
        with self.assertRaises(ValueError) as e:
            perfsummary.job(alt)
        self.assertIn("FSDP '64 (0)' is not one value", str(e.exception))


def fields(**kw):
    base = dict(gbs=1536, mbs=1, seq=8192, tp=4, pp=16, cp=1, vp=4, ep=None, fsdp=False)
    base.update(kw)
    return base


class MismatchTest(unittest.TestCase):
    row = {"gbs": 1536, "mbs": 1, "seq": 8192, "tp": 4, "pp": 16, "cp": 1, "vp": 4, "ep": None}

    def test_same_job(self):
        self.assertEqual(perfsummary.mismatches(self.row, fields()), [])
        self.assertEqual(perfsummary.mismatches(self.row, fields(ep=1)), [])  # n/a is no expert parallelism
        self.assertEqual(perfsummary.mismatches(dict(self.row, vp=None), fields(vp=None)), [])
        self.assertEqual(perfsummary.mismatches(dict(self.row, vp=None), fields(vp=1)), [])

    def test_field_by_field(self):
        self.assertEqual(perfsummary.mismatches(self.row, fields(gbs=768, vp=8)), [
            {"field": "gbs", "row": 1536, "recipe": 768},
            {"field": "vp", "row": 4, "recipe": 8},
        ])
        self.assertEqual(perfsummary.mismatches(dict(self.row, vp=None), fields(vp=2)),
                         [{"field": "vp", "row": None, "recipe": 2}])

    def test_fsdp_is_a_sharding_size(self):
        self.assertEqual(perfsummary.mismatches(dict(self.row, fsdp=64), fields(fsdp=True)), [])
        self.assertEqual(perfsummary.mismatches(dict(self.row, fsdp=0), fields(fsdp=False)), [])
        self.assertEqual(perfsummary.mismatches(dict(self.row, fsdp=64), fields(fsdp=False)),
                         [{"field": "fsdp", "row": 64, "recipe": False}])


FUNCTIONS = [
    "m_pretrain_256gpu_gb200_fp8sc_config",
    "m_pretrain_256gpu_gb200_fp8cs_config",
    "m_pretrain_256gpu_gb200_fp8cs_large_scale_config",
    "m_pretrain_128gpu_gb200_fp8cs_config",
    "m_sft_256gpu_gb200_fp8cs_config",
    "m_pretrain_256gpu_gb300_fp8cs_config",
]


class CandidatesTest(unittest.TestCase):
    def test_suffix_less_recipes_in_precision_order(self):
        got = perfsummary.candidates("m", "gb200", 256, ("fp8cs", "fp8sc", "fp8ds"), FUNCTIONS)
        self.assertEqual(got, ["m_pretrain_256gpu_gb200_fp8cs_config", "m_pretrain_256gpu_gb200_fp8sc_config"])
        self.assertEqual(perfsummary.candidates("m", "gb200", 64, ("fp8cs",), FUNCTIONS), [])

    def test_pick_the_first_that_matches_else_the_first(self):
        diffs = {"a": [{"field": "gbs"}], "b": [], "c": []}
        self.assertEqual(perfsummary.pick(["a", "b", "c"], diffs.get), ("b", []))
        self.assertEqual(perfsummary.pick(["a"], diffs.get), ("a", [{"field": "gbs"}]))


class FakeRuns:
    """RecipeRuns without MB: each function's compared fields."""

    def __init__(self, by_fn):
        self.by_fn = by_fn

    def get(self, name):
        return {}, [], self.by_fn[name]


class RowEntryTest(unittest.TestCase):
    def setUp(self):
        self.rows = perfsummary.parse_tables(DOC, "perf.md")
        self.functions = {
            "llama31_405b_pretrain_256gpu_gb200_fp8cs_config": ("mod", "src/llama/gb200/llama31.py"),
            "llama31_405b_pretrain_256gpu_gb200_fp8sc_config": ("mod", "src/llama/gb200/llama31.py"),
            "deepseek_v3_pretrain_256gpu_gb300_fp8mx_config": ("mod", "src/deepseek/gb300/deepseek_v3.py"),
        }

    def test_a_matching_row_names_its_dump(self):
        runs = FakeRuns({"deepseek_v3_pretrain_256gpu_gb300_fp8mx_config": fields(gbs=4096, seq=4096, tp=1, pp=2, vp=8, ep=32)})
        e = published.row_entry(self.rows[0], BUILTINS, self.functions, runs)
        self.assertEqual((e["model"], e["gpu"], e["num_gpus"], e["match"], e["dump"]),
                         ("deepseek_v3", "gb300", 256, True, "deepseek_v3_pretrain_256gpu_gb300_fp8mx_config.yaml"))
        self.assertEqual((e["doc"], e["section"], e["table"], e["line"]), ("perf.md", "26.08 NeMo Container", "Model: DeepSeekV3", self.rows[0].line))
        self.assertEqual(e["columns"]["GBS"], "4096")
        self.assertNotIn("mismatches", e)

    def test_the_precision_that_matches_is_picked_and_the_others_listed(self):
        runs = FakeRuns({"llama31_405b_pretrain_256gpu_gb200_fp8cs_config": fields(vp=8),
                         "llama31_405b_pretrain_256gpu_gb200_fp8sc_config": fields()})
        e = published.row_entry(self.rows[2], BUILTINS, self.functions, runs)
        self.assertEqual((e["function"], e["match"]), ("llama31_405b_pretrain_256gpu_gb200_fp8sc_config", True))
        self.assertEqual(e["tried"], ["llama31_405b_pretrain_256gpu_gb200_fp8cs_config", "llama31_405b_pretrain_256gpu_gb200_fp8sc_config"])

    def test_a_mismatch_is_data(self):
        runs = FakeRuns({"llama31_405b_pretrain_256gpu_gb200_fp8cs_config": fields(vp=8),
                         "llama31_405b_pretrain_256gpu_gb200_fp8sc_config": fields(gbs=768)})
        e = published.row_entry(self.rows[2], BUILTINS, self.functions, runs)
        self.assertEqual((e["function"], e["match"]), ("llama31_405b_pretrain_256gpu_gb200_fp8cs_config", False))
        self.assertEqual(e["mismatches"], [{"field": "vp", "row": 4, "recipe": 8}])
        self.assertNotIn("dump", e)

    def test_rows_without_a_recipe_say_why(self):
        e = published.row_entry(self.rows[1], BUILTINS, self.functions, FakeRuns({}))
        self.assertEqual(e["skipped"], "no perf recipe deepseek_v3_pretrain_1024gpu_h100_(fp8cs|fp8sc|fp8ds)_config")
        e = published.row_entry(self.rows[2], ["deepseek_v3"], self.functions, FakeRuns({}))
        self.assertEqual(e["skipped"], "'LLAMA3.1_405B' is no built-in model")
        e = published.row_entry(self.rows[5], BUILTINS, self.functions, FakeRuns({}))
        self.assertIn("is none of", e["skipped"])


class InputTest(unittest.TestCase):
    def test_archive_sections_by_name_or_release(self):
        avail = ["26.06.01 NeMo Container", "26.06 NeMo Container"]
        self.assertEqual(published.pick_section("26.06", avail, "a.md"), "26.06 NeMo Container")
        self.assertEqual(published.pick_section("26.06.01 NeMo Container", avail, "a.md"), "26.06.01 NeMo Container")
        with self.assertRaises(published.InputError) as e:
            published.pick_section("26.1", avail, "a.md")
        self.assertIn("a.md: --archive-section '26.1' is no section (allowed: 26.06.01 NeMo Container, 26.06 NeMo Container)", str(e.exception))

    def test_builtin_models_are_the_generated_files(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaises(published.InputError):
                published.builtin_models(d)
            for n in ("b_model.yaml", "a_model.yaml", "notes.txt"):
                open(os.path.join(d, n), "w").close()
            self.assertEqual(published.builtin_models(d), ["a_model", "b_model"])


if __name__ == "__main__":
    unittest.main()
