"""Import stubs: MB and MCore import torch, Transformer Engine, apex, triton,
HuggingFace and more at module level, but building a recipe's config objects
uses none of them. A stub module answers every attribute with a placeholder
that can be subclassed, called, used as a decorator or a context manager,
and compared; nothing it returns does any work.

Two kinds of module are stubbed:
  * HEAVY: always, even where installed, so that what the sandbox computes
    does not depend on the machine it runs on;
  * any other module that is not installed (the finder is last in
    sys.meta_path), except under megatron.core, megatron.training and
    megatron.bridge, whose missing modules are real errors.

A stubbed package reports the version MB's uv.lock pins
(``__version__`` and importlib.metadata.version), so version checks take the
path MB's own container takes. torch's dtypes are named sentinels of one
class, ``torch.dtype``, which print as torch does ("torch.bfloat16").
"""

import abc
import importlib.abc
import importlib.machinery
import importlib.metadata
import inspect
import re
import sys
import types
import typing

HEAVY = (
    "torch", "torchvision", "torchaudio", "transformer_engine", "transformer_engine_torch", "apex", "triton",
    "flash_attn", "flash_attn_interface", "flashinfer", "mamba_ssm", "causal_conv1d", "deep_ep", "nvshmem",
    "nvidia", "nvidia_resiliency_ext", "nv_one_logger", "modelopt", "transformers", "tokenizers", "huggingface_hub",
    "safetensors", "accelerate", "peft", "datasets", "diffusers", "wandb", "tensorboard", "mlflow", "comet_ml",
    "numpy", "einops", "PIL", "cv2", "decord", "webdataset", "sentencepiece", "tiktoken", "timm", "open_clip",
    "qwen_vl_utils", "nemo_run", "filelock", "psutil", "pynvml", "tensorstore", "zarr", "multistorageclient",
    "boto3", "botocore", "s3transfer", "awscrt",
)

# Namespaces whose own modules must import for real (a missing one is a bug
# the sandbox must not hide). Others under megatron (megatron.energon, a
# separate distribution) may be stubbed.
REAL_NAMESPACES = ("megatron.core", "megatron.training", "megatron.bridge")

# torch's dtypes by name; aliases print as the dtype they alias, as in torch.
TORCH_DTYPES = {
    "float32": "float32", "float": "float32", "float64": "float64", "double": "float64",
    "float16": "float16", "half": "float16", "bfloat16": "bfloat16",
    "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2", "float8_e8m0fnu": "float8_e8m0fnu",
    "uint8": "uint8", "int8": "int8", "int16": "int16", "short": "int16", "int32": "int32", "int": "int32",
    "int64": "int64", "long": "int64", "bool": "bool", "complex64": "complex64", "complex128": "complex128",
}


class dtype:
    """torch.dtype: a named sentinel per dtype, printing as torch does."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "torch." + self.name

    __str__ = __repr__

    @property
    def is_floating_point(self):
        return self.name.startswith(("float", "bfloat"))

    def __reduce__(self):
        return (getattr, (sys.modules["torch"], self.name))


# Names Python, typing, dataclasses, copy, pickle and inspect look up with
# hasattr/getattr to decide what an object is, and the serialisation hooks
# MCore's config containers probe for (to_cfg_dict, as_dict): a placeholder
# must not claim to have them. Any other name, special ones included (a
# pydantic model's __fields__), is a placeholder.
_PROBED = frozenset(
    """__mro_entries__ __class_getitem__ __origin__ __args__ __parameters__ __orig_bases__ __orig_class__
    __wrapped__ __signature__ __text_signature__ __annotations__ __dataclass_fields__ __dataclass_params__
    __post_init__ __isabstractmethod__ __abstractmethods__ __deepcopy__ __copy__ __reduce__ __reduce_ex__
    __getstate__ __setstate__ __getnewargs__ __getnewargs_ex__ __length_hint__ __fspath__ __await__
    __aiter__ __anext__ __aenter__ __aexit__ __set_name__ __get__ __set__ __delete__ __objclass__
    __self__ __func__ __code__ __defaults__ __kwdefaults__ __closure__ __globals__ __path__ __file__
    __spec__ __loader__ __all__ __version__ __slots__ __weakref__ __match_args__ __protocol_attrs__
    __non_callable_proto_members__ __callable_proto_members_only__ __final__ __required_keys__
    __optional_keys__ __total__ __supertype__ __typing_subst__ __typing_unpacked_tuple_args__
    __typing_is_unpacked_typevartuple__ __bound__ __constraints__ __covariant__ __contravariant__
    __attrs_attrs__ __pydantic_core_schema__ __get_pydantic_core_schema__ __get_validators__
    to_cfg_dict as_dict to_dict _asdict""".split()
)


def _is_placeholder(obj):
    return isinstance(obj, type) and obj.__dict__.get("_stub_placeholder", False)


# typing's Protocol metaclass derives from ABCMeta: deriving from it lets a
# class have both a placeholder and an ABC or a Protocol as bases.
_BaseMeta = getattr(typing, "_ProtocolMeta", abc.ABCMeta)


class _AnyParameters(dict):
    """A signature's parameters that include every name."""

    def __contains__(self, name):
        return True


class _AnySignature(inspect.Signature):
    """The signature of a placeholder: it takes any argument (MCore checks
    that TE's FusedAdam takes exp_avg_dtype before using it)."""

    @property
    def parameters(self):
        return _AnyParameters()


class StubMeta(_BaseMeta):
    """Metaclass of placeholders."""

    @property
    def __signature__(cls):
        return _AnySignature() if _is_placeholder(cls) else None

    def __getattr__(cls, name):
        if name in _PROBED or name.startswith("_abc_"):
            raise AttributeError(name)
        return placeholder(f"{cls.__qualname__}.{name}", cls.__module__)

    def __call__(cls, *args, **kwargs):
        if not _is_placeholder(cls):
            return super().__call__(*args, **kwargs)  # a real class derived from a placeholder
        if len(args) == 1 and not kwargs and (inspect.isfunction(args[0]) or isinstance(args[0], type)):
            return args[0]  # used as a decorator: @torch.jit.script, @triton.jit
        return object.__new__(cls)

    def register(cls, *args, **kwargs):
        """ABCMeta.register for real classes; on a placeholder, the
        placeholder's own method (HF's AutoModel.register(..., exist_ok=True))."""
        if _is_placeholder(cls):
            return args[0] if args else None
        return super().register(*args, **kwargs)

    def __getitem__(cls, item):  # annotations such as torch.Tensor[...]
        return cls

    # A placeholder class is an empty container; without these, `x in cls`
    # would iterate through __getitem__ forever.
    def __iter__(cls):
        return iter(())

    def __contains__(cls, item):
        return False

    def __or__(cls, other):  # annotations such as torch.Tensor | None
        return typing.Union[cls, other]

    def __ror__(cls, other):
        return typing.Union[other, cls]

    def __repr__(cls):
        return f"<stub {cls.__module__}.{cls.__qualname__}>"


class Placeholder(metaclass=StubMeta):
    """Base of every placeholder class; its instances are placeholders too."""

    _stub_placeholder = True

    def __init_subclass__(cls, **kwargs):  # class keywords (pydantic's extra=...) are ignored
        super().__init_subclass__()

    def __getattr__(self, name):
        if not _is_placeholder(type(self)) or (name.startswith("__") and name.endswith("__")):
            raise AttributeError(name)
        return placeholder(f"{type(self).__qualname__}.{name}", type(self).__module__)

    def __call__(self, *args, **kwargs):
        return type(self)(*args, **kwargs)

    # No GPU, no process group, nothing initialised: a placeholder is false.
    def __bool__(self):
        return False

    def __iter__(self):
        return iter(())

    def __contains__(self, item):
        return False

    def __len__(self):
        return 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __int__(self):
        return 0

    __index__ = __int__

    def __float__(self):
        return 0.0

    def __repr__(self):
        return f"<stub {type(self).__module__}.{type(self).__qualname__} instance>"


def placeholder(qualname, module):
    """A new placeholder class named qualname in module."""
    name = qualname.rsplit(".", 1)[-1]
    return StubMeta(name, (Placeholder,), {"__qualname__": qualname, "__module__": module, "_stub_placeholder": True})


class StubModule(types.ModuleType):
    """A stubbed module: a package whose every attribute is a placeholder."""

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        value = placeholder(name, self.__name__)
        setattr(self, name, value)
        return value


class _Loader(importlib.abc.Loader):
    def __init__(self, versions):
        self.versions = versions

    def create_module(self, spec):
        return StubModule(spec.name)

    def exec_module(self, module):
        module.__path__ = []  # a package, so that any submodule imports
        module.__file__ = f"<stub {module.__name__}>"
        root = module.__name__.split(".")[0]
        if root in self.versions:
            module.__version__ = self.versions[root]
        if module.__name__ == "torch":
            module.dtype = dtype
            for alias, name in TORCH_DTYPES.items():
                setattr(module, alias, module.__dict__.get(name) or dtype(name))


class StubFinder(importlib.abc.MetaPathFinder):
    """Finds stubs: forced (HEAVY, placed first) or fallback (placed last)."""

    def __init__(self, roots, versions, fallback):
        self.roots = frozenset(roots)
        self.fallback = fallback
        self.loader = _Loader(versions)
        self.stubbed = set()

    def find_spec(self, fullname, path=None, target=None):
        root = fullname.split(".")[0]
        if root in self.roots:
            return self._spec(fullname)
        if not self.fallback:
            return None
        if root in sys.stdlib_module_names or root.startswith("_"):
            return None  # the standard library probes for platform modules (_winapi): absent is the answer
        if any(fullname == ns or fullname.startswith(ns + ".") for ns in REAL_NAMESPACES):
            return None
        parent = sys.modules.get(fullname.rpartition(".")[0])
        if parent is not None and not isinstance(parent, StubModule) and root != "megatron":
            return None  # a missing submodule of a real package: a real ImportError
        return self._spec(fullname)

    def _spec(self, fullname):
        self.stubbed.add(fullname)
        return importlib.machinery.ModuleSpec(fullname, self.loader, is_package=True)


_LOCK_PACKAGE = re.compile(r'^\[\[package\]\]\s*\nname = "([^"]+)"\nversion = "([^"]+)"', re.M)


def lock_versions(uv_lock_text):
    """{module name: version} of the packages a uv.lock pins (distribution
    names with - read as the module's _, e.g. transformer-engine)."""
    out = {}
    for name, version in _LOCK_PACKAGE.findall(uv_lock_text):
        out[name.replace("-", "_")] = version.split("+")[0]
    return out


_installed = []


def install(versions=None, heavy=HEAVY):
    """Install the stub finders (idempotent) and return the fallback finder,
    whose ``stubbed`` set names every module stubbed so far."""
    if _installed:
        return _installed[1]
    versions = dict(versions or {})
    forced = StubFinder(heavy, versions, fallback=False)
    fallback = StubFinder((), versions, fallback=True)
    for name in list(sys.modules):
        if name.split(".")[0] in forced.roots:
            del sys.modules[name]
    sys.meta_path.insert(0, forced)
    sys.meta_path.append(fallback)
    _patch_metadata_version(versions)
    _installed.extend([forced, fallback])
    return fallback


def _patch_metadata_version(versions):
    """importlib.metadata.version answers for stubbed distributions with the
    version MB's uv.lock pins."""
    real = importlib.metadata.version

    def version(name):
        key = name.replace("-", "_").lower()
        for mod, v in versions.items():
            if mod.lower() == key:
                return v
        return real(name)

    importlib.metadata.version = version
