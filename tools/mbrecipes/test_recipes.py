"""Unit tests of the dumper's pure parts (no MB needed): run by ./test.sh."""
import unittest

import recipes


def rec(function, accepted=True):
    return {"name": recipes.parse_name(function), "accepted": accepted}


class NameTest(unittest.TestCase):
    def test_parse(self):
        n = recipes.parse_name("qwen3_235b_a22b_pretrain_128gpu_gb200_fp8mx_paged_stash_dev_config")
        self.assertEqual((n.model, n.task, n.num_gpus, n.gpu, n.precision, n.variant),
                         ("qwen3_235b_a22b", "pretrain", 128, "gb200", "fp8mx", "paged_stash_dev"))
        self.assertTrue(n.excluded_variant)
        self.assertEqual(recipes.parse_name("nemotron_3_5_lightning_pretrain_8gpu_gb200_bf16_config").model, "nemotron_3_5_lightning")
        self.assertFalse(recipes.parse_name("deepseek_v3_pretrain_64gpu_gb300_bf16_fsdp_config").excluded_variant)
        self.assertTrue(recipes.parse_name("deepseek_v3_pretrain_256gpu_b200_fp8mx_large_scale_config").excluded_variant)
        self.assertIsNone(recipes.parse_name("_nemotron_3_ultra_gb300_fp8mx_config"))
        self.assertIsNone(recipes.parse_name("llama3_8b_pretrain_8gpu_h100_fp32_config"))


class AcceptsTest(unittest.TestCase):
    def test_mcore_checks_in_order(self):
        ok, _ = recipes.accepts(64, tp=2, pp=8, cp=1, ep=4, etp=1, vp=4, gbs=1024, mbs=1)
        self.assertTrue(ok)
        for kw, want in [
            (dict(num_gpus=64, tp=2, pp=8, cp=1, ep=64, etp=1, vp=4, gbs=1024, mbs=1), "expert_tensor_model_pipeline_parallel size (512)"),
            (dict(num_gpus=12, tp=8, pp=1, cp=1, ep=1, etp=None, vp=None, gbs=12, mbs=1), "world_size (12) is not divisible by 8"),
            (dict(num_gpus=256, tp=2, pp=1, cp=1, ep=1, etp=None, vp=None, gbs=192, mbs=1), "global batch size (192) is not divisible by micro batch size (1) times data parallel size (128)"),
            (dict(num_gpus=8, tp=1, pp=1, cp=1, ep=1, etp=None, vp=2, gbs=8, mbs=1), "should be greater than 1 with interleaved"),
            # ETP defaults to TP, as in MCore: 8 × 1 × 1 does not divide 4.
            (dict(num_gpus=4, tp=8, pp=1, cp=1, ep=1, etp=None, vp=None, gbs=4, mbs=1), "not divisible by 8"),
        ]:
            ok, why = recipes.accepts(**kw)
            self.assertFalse(ok, kw)
            self.assertIn(want, why)


class SelectTest(unittest.TestCase):
    def test_smallest_bf16_else_first_precision(self):
        got = recipes.select([
            rec("m_pretrain_64gpu_h100_bf16_config"),
            rec("m_pretrain_16gpu_h100_bf16_config", accepted=False),  # MCore rejects it
            rec("m_pretrain_32gpu_h100_bf16_config"),
            rec("m_pretrain_8gpu_h100_fp8cs_config"),  # smaller, but bf16 comes first
            rec("m_pretrain_8gpu_h100_bf16_dev_config"),  # a dev variant
            rec("m_sft_8gpu_h100_bf16_config"),
            rec("m_pretrain_8gpu_b300_nvfp4_config"),
            rec("m_pretrain_8gpu_b300_fp8mx_config"),
            rec("m_pretrain_16gpu_b300_fp8cs_config"),
            rec("m_pretrain_64gpu_gb300_bf16_config"),
            rec("m_pretrain_64gpu_gb300_bf16_fsdp_config"),
            rec("m_pretrain_256gpu_gb300_bf16_config"),
        ])
        self.assertEqual({k: v["name"].function for k, v in got.items()}, {
            ("m", "h100"): "m_pretrain_32gpu_h100_bf16_config",
            ("m", "b300"): "m_pretrain_8gpu_b300_fp8mx_config",
            ("m", "gb300"): "m_pretrain_64gpu_gb300_bf16_config",
        })


class TrimTest(unittest.TestCase):
    def test_keeps_listed_keys_under_model_and_its_transformer(self):
        config = {
            "model": {"_target_": "GPTModelConfig", "vocab_size": 10, "other": 1,
                      "transformer": {"_target_": "TransformerConfig", "num_layers": 2, "junk": 3}},
            "mixed_precision": "bf16_mixed",
            "comm_overlap": None,
            "train": {"global_batch_size": 8, "micro_batch_size": 1, "train_iters": 50},
            "logger": {"x": 1},
        }
        keys = recipes.read_keys("# c\nmodel._target_\nmodel.vocab_size\nmodel.num_layers\nmixed_precision\nmixed_precision.fp8\n"
                                 "comm_overlap.delay_wgrad_compute\ntrain.global_batch_size\n")
        self.assertEqual(recipes.trim(config, keys), {
            "model": {"_target_": "GPTModelConfig", "vocab_size": 10,
                      "transformer": {"_target_": "TransformerConfig", "num_layers": 2}},
            "mixed_precision": "bf16_mixed",
            "comm_overlap": None,
            "train": {"global_batch_size": 8},
        })


if __name__ == "__main__":
    unittest.main()
