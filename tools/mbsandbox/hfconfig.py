"""HuggingFace configs without HuggingFace: MB builds most model providers
from a model's published config.json (AutoBridge.from_hf_pretrained(ID)
reads it through transformers.AutoConfig). In the sandbox transformers is a
stub; this module gives it a PretrainedConfig class and an AutoConfig that
answers from hf_configs.json: per model ID, the values of the model's
published config.json and the URL they were read from.

Only models listed there load; any other ID fails with the list of known
ones, so a recipe never runs on made-up values.
"""

import copy
import json
import os
import sys

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hf_configs.json")


class UnknownModelError(OSError):
    """An HF model ID hf_configs.json does not hold."""


class PretrainedConfig:
    """The parts of transformers.PretrainedConfig MB's bridges use: the
    config.json values as attributes, to_dict, get_text_config."""

    model_type = ""
    # transformers' PretrainedConfig defaults for keys a config.json may
    # leave out (transformers configuration_utils.py): MB reads them with
    # hasattr, so an absent key must read as transformers would answer.
    torch_dtype = None
    tie_word_embeddings = True
    architectures = None

    def __init__(self, **kwargs):
        for k, v in kwargs.items():
            setattr(self, k, v)

    def to_dict(self):
        return {k: copy.deepcopy(v) for k, v in vars(self).items() if not k.startswith("_")}

    def to_diff_dict(self):
        return self.to_dict()

    @classmethod
    def from_dict(cls, config_dict, **kwargs):
        values = dict(config_dict)
        values.update(kwargs)
        return cls(**values)

    def get_text_config(self, decoder=None, encoder=None):
        text = getattr(self, "text_config", None)
        return text if isinstance(text, PretrainedConfig) else self

    def __contains__(self, key):
        return key in vars(self)

    def __repr__(self):
        return f"{type(self).__name__}({json.dumps(self.to_dict(), sort_keys=True, default=str)})"


def _nested(values):
    """Sub-configs (text_config, ...) as PretrainedConfig, as HF builds them."""
    out = {}
    for k, v in values.items():
        out[k] = PretrainedConfig(**_nested(v)) if k.endswith("_config") and isinstance(v, dict) else v
    return out


class HFConfigs:
    """The published configs of hf_configs.json, by HF model ID."""

    def __init__(self, entries):
        self.entries = entries
        self.loaded = []  # model IDs in the order recipes loaded them

    def get(self, model_id):
        entry = self.entries.get(str(model_id))
        if entry is None:
            # HF's own wording for a missing config.json, which MB's loader
            # knows not to retry (models/hf_pretrained/safe_config_loader.py).
            raise UnknownModelError(
                f"mbsandbox: {model_id} does not appear to have a file named config.json in "
                f"{os.path.basename(DATA)} (known: {', '.join(sorted(self.entries)) or 'none'})"
            )
        self.loaded.append(str(model_id))
        cfg = PretrainedConfig(**_nested(copy.deepcopy(entry["config"])))
        cfg.name_or_path = str(model_id)
        cfg._name_or_path = str(model_id)
        return cfg

    def source(self, model_id):
        return self.entries[model_id]["source"]


def load(path=DATA):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    for model_id, entry in data["models"].items():
        if not entry.get("source") or not isinstance(entry.get("config"), dict):
            raise ValueError(f"{path}: {model_id}: every model needs a source and a config")
    return HFConfigs(data["models"])


def load_default():
    return load(DATA)


def install(configs):
    """Give the stubbed transformers package the config classes MB uses."""
    import transformers  # the stub module
    import transformers.configuration_utils

    class AutoConfig:
        @classmethod
        def from_pretrained(cls, model_id, **kwargs):
            return configs.get(model_id)

        @classmethod
        def register(cls, model_type, config_class, exist_ok=False):
            pass  # MB registers its own config classes for remote-code models

    for mod in (transformers, transformers.configuration_utils):
        mod.PretrainedConfig = PretrainedConfig
        mod.PreTrainedConfig = PretrainedConfig
    transformers.AutoConfig = AutoConfig
    sys.modules["transformers"].hf_configs = configs
