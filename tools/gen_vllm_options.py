"""Per-release table of every ``vllm serve`` option, read from vLLM's own argument parser.

What it does
    For every vLLM source release (PyPI sdist) found under ``--sdists DIR`` it starts a fresh
    interpreter (one subprocess per release) whose ``sys.path`` holds that release's unpacked
    source, runs the release's own ``vllm`` console entry point (``vllm.scripts:main`` up to
    0.7.2, ``vllm.entrypoints.cli.main:main`` after; read from the sdist's setup.py /
    pyproject.toml) with ``sys.argv = ["vllm", "serve", "MODEL"]`` and stops it the moment it
    calls ``parse_args``: at that point the root ``FlexibleArgumentParser`` is built exactly as
    ``vllm serve`` builds it (serve subparser, ``make_arg_parser``,
    ``AsyncEngineArgs.add_cli_args`` ...). If that fails,
    it falls back to building the serve parser by hand the way that release did
    (``ServeSubcommand.subparser_init`` or the inline ``scripts.py`` code) and says so in the
    parser ``notes`` (no release needed the fallback in the committed run).

    From the serve subparser it records every option action: its dest, every option string the
    parser registered (so generated ``--no-X``/``--disable-X`` strings are included, even ones
    hidden from ``--help``), the action class, the ``type`` callable and a normalised ``kind``
    (found by calling the converter on sample strings), nargs, choices, default and whether it
    is deprecated (the parser's own ``deprecated=`` marker, or help text that says so). Then it
    parses a fixed list of argv snippets (``PROBES``; add more there) with the root parser,
    exactly as ``vllm serve MODEL <snippet>`` would, and records accepted + the parsed value
    (``unchanged`` when it equals the default; deprecation warnings vLLM logged), or rejected +
    argparse's message. Parser-wide facts (``allow_abbrev``, whether ``FlexibleArgumentParser``
    rewrites ``_`` to ``-``, reads ``--config`` YAML, expands ``-O3``, accepts dotted
    ``--json-arg.key``) are found by probes too, not by reading the source.

    The result is ``sits_doctor/frameworks/data/vllm_options.json``: per option (keyed by dest),
    a list of segments ``{"first": v1, "last": v2, ...}`` covering contiguous runs of releases in
    which the parser's entry is identical (an option absent from a release has no segment
    covering it). Should two actions of one release share a dest, the canonical one (whose flags
    include ``--<dest>``) keeps the key and the other is keyed ``dest@first-flag`` and carries
    ``"dest"``. Probes are segmented the same way.

    The main pass runs in 8 processes (PYTHONHASHSEED 0-7): a few releases build an option's
    choices by iterating a set (0.8.5's ``--guided-decoding-backend`` gets either the V0 or the
    V1 backend list, differently from one process to the next, in the real ``vllm serve`` too).
    Such an option or probe entry is written once, marked ``"varies_between_runs": true``, with
    the other outcomes seen in ``"alternatives"``. A separate help pass (``--help`` in argv)
    reads help texts only: with ``--help`` in argv some releases build a different parser (no
    ``--model`` in 0.9-0.17), so options and probes never come from it.

What is stubbed, and why the results are still the parser's own
    vLLM imports torch, transformers, triton, ray, fastapi, openai, ... and its compiled
    extensions (``vllm._C``) while building the parser. None of those decide which options
    exist or how argparse converts them, so an import hook (``sys.meta_path`` finder) serves
    every module outside an allow-list as a permissive stub, whether or not it is installed
    here (so the result does not depend on this machine): attribute access gives a stub class
    that is callable (as a decorator it hands back the function, wrapped so that
    ``op.register_fake`` & co. exist), subscriptable, usable as a base class, a type annotation
    and a pydantic field type (``any`` schema). Real modules are used for the Python standard
    library, vLLM itself and the libraries whose behaviour *is* part of argument parsing:
    pydantic (vLLM validates JSON config arguments with it), PyYAML (``--config``), regex,
    msgspec, packaging, typing_extensions, annotated_types and numpy. A handful of stub values
    must be real: ``torch.iinfo``/``finfo`` limits (pydantic ``Field`` bounds) and
    ``torch.library.infer_schema`` (a schema string built from the function's signature, for
    vLLM's IR op registry); stubbed torch/transformers/... report the version the release's
    requirements/cuda.txt or common.txt pin or floor. ``pynvml`` (and vLLM's vendored copy) is
    a fake reporting one sm90 GPU with 80 GiB, so vLLM's own platform detection picks its CUDA
    platform, as on a machine where ``vllm serve`` really runs (this matters: e.g. 0.33's
    ``--mm-processor-device`` offers ``cuda`` only there); modules that signal other hardware
    (libtpu, amdsmi, IPEX, Neuron, ...) are never stubbed and stay missing. Modules missing
    from an sdist (``vllm._C``, built flash-attn) are stubbed too. ``importlib.util.find_spec``
    keeps telling the truth (stubs are only handed to ``import``), so vLLM's own "is X
    installed?" checks take their not-installed path. A vLLM module that still raises while
    importing under stubs keeps what it defined and is listed in the release's parser notes as
    "degraded" (none in the committed run).

    The parser objects, their actions, type converters, choices and defaults are vLLM's own
    code running unmodified, and the probes go through vLLM's ``FlexibleArgumentParser
    .parse_args``. What stubs could still change: defaults or choices computed from torch or
    GPU state. Validation that vLLM does after parsing (``validate_parsed_serve_args``,
    ``EngineArgs.create_engine_config``) is not run: a probe marked ``ok`` is accepted by the
    parser, not necessarily by the engine. argparse itself is this interpreter's (3.11; vLLM
    supports 3.9-3.14 across these releases). The environment is cleared (fixed HOME, no
    ``VLLM_*`` variables) so defaults read from the environment are the stock ones.

How to re-run
    When a new vLLM release is on PyPI, one command adds it (and any other release the table
    lacks) and leaves the other releases' entries as they are; :data:`sits_doctor.frameworks
    .vllm.NEWEST` and everything judged "at the newest release" follow the table::

        python3.11 -m venv /tmp/gen && /tmp/gen/bin/pip install -r tools/gen_vllm_options.requirements.txt
        /tmp/gen/bin/python tools/gen_vllm_options.py --update --sdists /tmp/vllm_sdists

    It downloads the new releases' sdists (PyPI's JSON API, sha256 checked), runs their parsers,
    and runs the newest release already in the table again as a control: when this machine's
    result for it differs from the committed one (other library versions, a generator change),
    it writes nothing, and the whole table has to be regenerated as below.

    The sdists: ``pip download --no-deps --no-binary :all: vllm==X -d DIR`` fails before it
    saves the file (pip prepares the sdist's metadata, whose build needs torch), so
    ``--download`` fetches every release's sdist from PyPI's JSON API instead, checks its
    sha256 and unpacks what is needed (``vllm/**/*.py``, setup.py, pyproject.toml,
    requirements). Releases without an sdist are listed in ``DIR/missing.json`` and end up in
    ``failed``. About 1.3 GB of sdists for 0.6.0-0.33.0; the run takes ~7 min on 2 cores.

        python tools/gen_vllm_options.py --sdists /work/vllm_sdists --download --min 0.6.0
        python tools/gen_vllm_options.py --sdists /work/vllm_sdists \\
            --out sits_doctor/frameworks/data/vllm_options.json --jobs 2

    ``--only 0.8.4,0.8.5`` runs some releases and prints a summary instead of writing, and
    ``--keep DIR`` keeps each release's raw result and log (``GEN_VLLM_OPTIONS_DEBUG=1`` adds
    tracebacks of degraded modules and deprecation help texts). Needs: Python 3.11, packaging,
    pydantic, pyyaml, regex, msgspec, numpy (the versions used are written into each ``parser``
    segment's notes). Nothing is downloaded or imported from vLLM when this module is imported.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

# The argv snippets parsed by every release as ``vllm serve MODEL <snippet>`` (shlex syntax).
PROBES: list[str] = [
    "--disable-log-requests",
    "--enable-log-requests",
    "--no-disable-log-requests",
    "--disable-log-stats",
    "--max-model-len 8k",
    "--max-model-len 8K",
    "--max-model-len 8192",
    "--max-model-len auto",
    "--max-model-len -1",
    "--compilation-config 3",
    "--compilation-config '{\"level\": 3}'",
    "--compilation-config '{\"mode\": 3}'",
    "--compilation-config.level 3",
    "--compilation-config.mode 3",
    "-O3",
    "-O 3",
    "-O0",
    "--enable-chunked-prefill",
    "--enable-chunked-prefill=false",
    "--enable-chunked-prefill=False",
    "--enable-chunked-prefill false",
    "--no-enable-chunked-prefill",
    "--disable-chunked-prefill",
    "--enable-prefix-caching",
    "--no-enable-prefix-caching",
    "--disable-prefix-caching",
    "--max-num-seq 8",
    "--max-num-seqs 8",
    "--max-model 4096",
    "--gpu-mem 0.8",
    "--max_model_len 4096",
    "--max_num_seqs=8",
    "--swap-space 4",
    "--kv-cache-dtype fp8",
    "--kv-cache-dtype fp8_e4m3",
    "--kv-cache-dtype bogus",
    "--block-size 24",
    "--block-size 16",
    "--gpu-memory-utilization 0.9",
    "--gpu-memory-utilization 1.5",
    "-tp 2",
    "--tensor-parallel-size 2",
    "--tensor-parallel-size two",
    "-pp 2",
    "-dp 2",
    "-q fp8",
    "--quantization bitsandbytes",
    "--quantization gguf",
    "--dtype bfloat16",
    "--dtype bogus",
    "--enforce-eager",
    "--enforce-eager=false",
    "--no-enforce-eager",
    "--trust-remote-code",
    "--calculate-kv-scales",
    "--max-seq-len-to-capture 8192",
    "--cuda-graph-sizes 8 16",
    "--cudagraph-capture-sizes 8 16",
    "--max-cudagraph-capture-size 256",
    "--num-scheduler-steps 8",
    "--use-v2-block-manager",
    "--task generate",
    "--runner generate",
    "--disable-log-requests --enable-log-requests",
    "--rope-scaling '{\"rope_type\": \"yarn\", \"factor\": 4.0}'",
    "--hf-overrides '{\"max_position_embeddings\": 4096}'",
    "--speculative-config '{\"method\": \"ngram\", \"num_speculative_tokens\": 3}'",
    "--max-num-batched-tokens 16k",
    "--cpu-offload-gb 4",
    "--disable-sliding-window",
    "--enable-auto-tool-choice",
    "--tool-call-parser hermes",
    "--reasoning-parser deepseek_r1",
    "--guided-decoding-backend xgrammar",
    "--guided-decoding-backend outlines",
    "--preemption-mode swap",
    "--device cuda",
    "--tokenizer-mode auto",
    "--generation-config vllm",
    "--api-server-count 2",
    "--limit-mm-per-prompt '{\"image\": 2}'",
    "--limit-mm-per-prompt image=2",
]

# Top-level modules used for real (besides the standard library and vLLM): what they do is
# part of how vLLM parses arguments. Everything else imported by vLLM is a stub.
REAL_MODULES = frozenset(
    {
        "pydantic", "pydantic_core", "annotated_types", "typing_inspection", "typing_extensions",
        "packaging", "yaml", "_yaml", "regex", "numpy", "msgspec",
    }
)

# Never stubbed: vLLM imports these to detect the hardware platform (a stub would make TPU,
# ROCm, XPU, Neuron, ... look present). They stay missing, as on a plain CUDA machine.
NEVER_STUB = frozenset(
    {
        "libtpu", "amdsmi", "intel_extension_for_pytorch", "oneccl_bindings_for_pytorch", "zentorch",
        "transformers_neuronx", "neuronx_distributed", "neuronx_distributed_inference", "torch_neuronx",
        "habana_frameworks", "openvino", "tpu_inference", "torch_xla", "vllm_omni",
    }
)

# Help text that says the option itself is deprecated (not "Enable deprecated metrics ...").
DEPRECATED_HELP = re.compile(
    r"\[deprecated\]|\(deprecated|^\s*deprecated\b|\bdeprecated\s*[:.,)]|\b(is|are|has been|was|now) deprecated\b",
    re.IGNORECASE,
)

ACTION_NAMES = {
    "_StoreAction": "store", "_StoreTrueAction": "store_true", "_StoreFalseAction": "store_false",
    "_StoreConstAction": "store_const", "_AppendAction": "append",
    "_AppendConstAction": "append_const", "_CountAction": "count", "_ExtendAction": "extend",
    "_HelpAction": "help", "_VersionAction": "version",
}

MODEL = "MODEL"

# vLLM modules that raised while importing under stubs (name -> first line of the error).
DEGRADED: dict[str, str] = {}


# ----------------------------------------------------------------------------------------------
# Worker side: runs inside the per-release subprocess.
# ----------------------------------------------------------------------------------------------


def _requirement_versions(src: Path) -> dict[str, str]:
    """torch/transformers/... versions pinned (==) or floored (>=) by the sdist's requirements."""
    wanted = {"torch", "transformers", "triton", "tokenizers", "huggingface_hub"}
    found: dict[str, str] = {}
    for name in ("requirements/cuda.txt", "requirements-cuda.txt", "requirements/common.txt",
                 "requirements-common.txt"):
        path = src / name
        if not path.is_file():
            continue
        for line in path.read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            m = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[[^]]*\])?\s*(==|>=|~=)\s*([0-9][0-9A-Za-z.]*)(?:\+\S*)?\s*(?:,.*)?", line)
            if m:
                pkg = m.group(1).lower().replace("-", "_")
                if pkg in wanted and pkg not in found:
                    found[pkg] = m.group(3)
    return found


def _install_stubs(release: str, requirement_versions: dict[str, str]) -> None:
    """Serve permissive stub modules for every import outside the allow-list."""
    import abc
    import functools
    import importlib.abc
    import importlib.machinery
    import importlib.metadata
    import importlib.util
    import types

    stdlib = set(sys.stdlib_module_names)
    state = {"truthful": False}
    # Versions that stubbed core dependencies report (module.__version__ and package metadata):
    # the lowest the release's own CUDA/common requirements allow.
    versions = {"torch": "2.4.0", "transformers": "4.45.0", "triton": "3.0.0", "tokenizers": "0.19.1",
                "huggingface_hub": "0.24.0"}
    versions.update(requirement_versions)
    dist_versions = {k.replace("_", "-"): v for k, v in versions.items()}

    # The few stub values that must be real (pydantic Field bounds, numeric limits, op schemas).
    special = {
        "torch.iinfo": lambda *a, **k: types.SimpleNamespace(min=-(2**63), max=2**63 - 1, bits=64),
        "torch.finfo": lambda *a, **k: types.SimpleNamespace(
            min=-3.4028234663852886e38, max=3.4028234663852886e38, eps=1.1920928955078125e-07,
            tiny=1.1754943508222875e-38, bits=32, resolution=1e-06),
        "torch.library.infer_schema": lambda fn, *a, **k: _infer_schema(fn),
    }

    def _infer_schema(fn):
        """A torch op schema string with the function's parameter names and number of outputs."""
        import inspect
        import typing

        try:
            ret = typing.get_type_hints(fn).get("return")
        except Exception:
            ret = None
        outs = typing.get_args(ret) if typing.get_origin(ret) is tuple else ()
        returns = "(" + ", ".join("Tensor" for _ in outs) + ")" if outs else "Tensor"
        params = ", ".join(f"Tensor {p}" for p in inspect.signature(fn).parameters)
        return f"({params}) -> {returns}"

    class Wrapped:
        """What a stub decorator returns for a function: calls it, binds like a method, and
        answers any other attribute (``op.register_fake``) with a stub."""

        def __init__(self, fn):
            functools.update_wrapper(self, fn)

        def __call__(self, *args, **kwargs):
            return self.__wrapped__(*args, **kwargs)

        def __get__(self, obj, objtype=None):
            return self if obj is None else types.MethodType(self, obj)

        def __getattr__(self, name):
            if name.startswith("__") and name.endswith("__"):
                raise AttributeError(name)
            return _stub_class(f"{self.__qualname__}.{name}", "stub")

    def _decorated(fn):
        return fn if isinstance(fn, type) else Wrapped(fn)

    def _fallback_schema(cls, source, handler):  # pydantic: a stub type accepts anything
        from pydantic_core import core_schema

        return core_schema.any_schema()

    class StubMeta(abc.ABCMeta):
        def __new__(mcs, name, bases, ns, **kwargs):  # swallow class keywords (msgspec etc.)
            return super().__new__(mcs, name, bases, ns)

        def __init__(cls, name, bases, ns, **kwargs):
            super().__init__(name, bases, ns)

        def __getattr__(cls, name):
            if name.startswith("__") and name.endswith("__"):
                raise AttributeError(name)
            path = f"{cls.__module__}.{cls.__qualname__}.{name}"
            if path in special:
                return special[path]
            return _stub_class(f"{cls.__qualname__}.{name}", cls.__module__)

        def __call__(cls, *args, **kwargs):
            if not cls.__dict__.get("_pure_stub"):
                return super().__call__(*args, **kwargs)  # a vLLM class derived from a stub
            if len(args) == 1 and not kwargs and callable(args[0]):
                return _decorated(args[0])  # used as a decorator
            return StubInstance(cls.__qualname__)

        def register(cls, *args, **kwargs):  # AutoConfig.register(...), not ABCMeta's
            return args[-1] if args else None

        def __getitem__(cls, item):
            return cls

        def __setitem__(cls, key, value):
            pass

        def __delitem__(cls, key):
            pass

        def __contains__(cls, item):
            return False

        def __or__(cls, other):
            return type.__or__(cls, other)

        def __ror__(cls, other):
            return type.__ror__(cls, other)

        def __iter__(cls):
            return iter(())

        def __len__(cls):
            return 0

        def __bool__(cls):
            return False

        def __repr__(cls):
            return f"<stub {cls.__module__}.{cls.__qualname__}>"

    class StubBase(metaclass=StubMeta):
        _pure_stub = True

        def __init__(self, *args, **kwargs):
            pass

        def __init_subclass__(cls, **kwargs):
            pass

        __get_pydantic_core_schema__ = classmethod(_fallback_schema)

        def __getattr__(self, name):
            if name.startswith("__") and name.endswith("__"):
                raise AttributeError(name)
            return _stub_class(f"{type(self).__qualname__}.{name}", type(self).__module__)

    def _stub_class(qualname: str, module: str) -> type:
        cache = _stub_class.cache
        key = (module, qualname)
        if key not in cache:
            cls = StubMeta(qualname.rsplit(".", 1)[-1], (StubBase,), {"_pure_stub": True})
            cls.__qualname__ = qualname
            cls.__module__ = module
            cache[key] = cls
        return cache[key]

    _stub_class.cache = {}

    def _ret(self, *a, **k):
        return StubInstance(self._name)

    class StubInstance:
        __slots__ = ("_name",)

        def __init__(self, name="stub"):
            object.__setattr__(self, "_name", name)

        def __getattr__(self, name):
            if name.startswith("__") and name.endswith("__"):
                raise AttributeError(name)
            return StubInstance(f"{self._name}.{name}")

        def __setattr__(self, name, value):
            pass

        def __call__(self, *args, **kwargs):
            if len(args) == 1 and not kwargs and callable(args[0]):
                return _decorated(args[0])
            return StubInstance(self._name + "()")

        def __getitem__(self, item):
            return StubInstance(self._name + "[]")

        def __setitem__(self, key, value):
            pass

        def __iter__(self):
            return iter(())

        def __len__(self):
            return 0

        def __bool__(self):
            return False

        def __int__(self):
            return 0

        __index__ = __int__

        def __float__(self):
            return 0.0

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def __contains__(self, item):
            return False

        def __repr__(self):
            return f"<stub {self._name}>"

        def __str__(self):
            return "stub"

        def __hash__(self):
            return hash(self._name)

        def __eq__(self, other):
            return isinstance(other, StubInstance) and other._name == self._name

        def __lt__(self, other):
            return False

        __le__ = __gt__ = __ge__ = __lt__
        __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _ret
        __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __pow__ = _ret
        __and__ = __rand__ = __or__ = __ror__ = __neg__ = __invert__ = _ret

    class StubModule(types.ModuleType):
        def __getattr__(self, name):
            if f"{self.__name__}.{name}" in special:
                return special[f"{self.__name__}.{name}"]
            if name == "__version__":
                return versions.get(self.__name__.split(".")[0], "99.0.0")
            if name in ("__path__", "__file__", "__spec__", "__loader__"):
                raise AttributeError(name)
            if name.startswith("__") and name.endswith("__"):
                raise AttributeError(name)
            value = _stub_class(name, self.__name__)
            setattr(self, name, value)
            return value

    # pynvml (and vLLM's vendored copy) reports one CUDA GPU, so that vLLM's own platform
    # detection picks its CUDA platform, as on a machine where `vllm serve` really runs.
    def _nvml_memory(*a, **k):
        return types.SimpleNamespace(total=80 * 2**30, free=80 * 2**30, used=0)

    fake_nvml = {
        "nvmlInit": lambda *a, **k: None,
        "nvmlShutdown": lambda *a, **k: None,
        "nvmlDeviceGetCount": lambda *a, **k: 1,
        "nvmlDeviceGetHandleByIndex": lambda i, *a, **k: ("gpu", i),
        "nvmlDeviceGetCudaComputeCapability": lambda *a, **k: (9, 0),
        "nvmlDeviceGetName": lambda *a, **k: "NVIDIA H100 80GB HBM3",
        "nvmlDeviceGetMemoryInfo": _nvml_memory,
        "nvmlDeviceGetUUID": lambda *a, **k: "GPU-00000000-0000-0000-0000-000000000000",
        "nvmlSystemGetDriverVersion": lambda *a, **k: "570.00",
        "NVMLError": type("NVMLError", (Exception,), {}),
    }
    fake_modules = {"pynvml": fake_nvml, "vllm.third_party.pynvml": fake_nvml}

    class StubLoader(importlib.abc.Loader):
        def create_module(self, spec):
            module = StubModule(spec.name)
            module.__path__ = []
            module.__file__ = f"<stub {spec.name}>"
            for key, value in fake_modules.get(spec.name, {}).items():
                setattr(module, key, value)
            return module

        def exec_module(self, module):
            pass

    def _importer_is_real_library() -> bool:
        """True when the import statement runs inside a real (allow-listed) library."""
        frame = sys._getframe(2)
        while frame is not None:
            mod = frame.f_globals.get("__name__", "")
            if not mod.startswith("importlib") and mod != __name__ and not mod.startswith("_frozen"):
                top = mod.split(".")[0]
                return top in REAL_MODULES or (top in stdlib and top not in ("__main__",))
            frame = frame.f_back
        return False

    class DegradingLoader(importlib.abc.Loader):
        """Runs a vLLM module; if it raises (a stub could not stand in for something it does at
        import time), keeps what it defined and turns the rest into stubs. Every such module is
        listed in the release's notes (DEGRADED)."""

        def __init__(self, real):
            self.real = real

        def create_module(self, spec):
            return self.real.create_module(spec)

        def exec_module(self, module):
            try:
                self.real.exec_module(module)
            except Exception as e:  # noqa: BLE001
                msg = f"{type(e).__name__}: {e}".splitlines()[0][:160]
                DEGRADED.setdefault(module.__name__, msg)
                if os.environ.get("GEN_VLLM_OPTIONS_DEBUG"):
                    import traceback

                    traceback.print_exc()
                module.__class__ = StubModule

        def get_source(self, fullname):  # inspect.getsource / vLLM's docstring reader
            return self.real.get_source(fullname)

        def __getattr__(self, name):
            return getattr(self.real, name)

    class StubFinder(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path=None, target=None):
            if state["truthful"]:
                return None
            top = fullname.split(".")[0]
            if fullname in fake_modules:
                return importlib.machinery.ModuleSpec(fullname, StubLoader(), is_package=True)
            if top in stdlib or top in REAL_MODULES or top in NEVER_STUB:
                return None
            if top == "vllm":
                if fullname == "vllm._version":
                    return None  # served below as a real module
                spec = importlib.machinery.PathFinder.find_spec(fullname, path)
                if spec is not None:
                    if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                        spec.loader = DegradingLoader(spec.loader)
                    return spec
            elif _importer_is_real_library():
                return None
            return importlib.machinery.ModuleSpec(fullname, StubLoader(), is_package=True)

    sys.meta_path.insert(0, StubFinder())

    real_find_spec = importlib.util.find_spec

    def truthful_find_spec(name, package=None):
        old = state["truthful"]
        state["truthful"] = True
        try:
            return real_find_spec(name, package)
        except (ImportError, ValueError):
            return None
        finally:
            state["truthful"] = old

    importlib.util.find_spec = truthful_find_spec

    real_version = importlib.metadata.version

    def version(name):
        norm = name.lower().replace("_", "-")
        if norm == "vllm":
            return release
        if norm in dist_versions:
            return dist_versions[norm]
        return real_version(name)

    importlib.metadata.version = version

    fake = types.ModuleType("vllm._version")
    fake.__version__ = fake.version = release
    fake.__version_tuple__ = fake.version_tuple = tuple(
        int(p) if p.isdigit() else p for p in release.split(".")
    )
    sys.modules.setdefault("vllm._version", fake)


def _entry_point(src: Path) -> str:
    for name in ("pyproject.toml", "setup.py"):
        path = src / name
        if path.is_file():
            m = re.search(r"""["']?vllm["']?\s*=\s*["']?([\w.]+:\w+)""", path.read_text())
            if m:
                return m.group(1)
    if (src / "vllm/entrypoints/cli/main.py").is_file():
        return "vllm.entrypoints.cli.main:main"
    return "vllm.scripts:main"


class _Captured(Exception):
    def __init__(self, parser):
        self.parser = parser


class _ParseError(Exception):
    pass


def _capture_root_parser(entry: str, help_pass: bool = False):
    """Run the release's own `vllm` entry point until it calls parse_args on the root parser."""
    import importlib

    real_parse_args = argparse.ArgumentParser.parse_args

    def capture(self, args=None, namespace=None):
        sub = self._subparsers
        if sub is not None:
            for action in sub._group_actions:
                if isinstance(action, argparse._SubParsersAction) and "serve" in action.choices:
                    raise _Captured(self)
        return real_parse_args(self, args, namespace)

    module_name, func = entry.split(":")
    argparse.ArgumentParser.parse_args = capture
    saved_argv = sys.argv
    # Parser construction looks at sys.argv: with "--help" there, 0.9-0.17 leave out --model and
    # 0.10+ read the config docstrings into help texts. The main pass sees what a user's
    # `vllm serve MODEL ...` sees; the help pass only harvests help texts.
    sys.argv = ["vllm", "serve", MODEL] + (["--help"] if help_pass else [])
    try:
        getattr(importlib.import_module(module_name), func)()
    except _Captured as c:
        return c.parser
    finally:
        argparse.ArgumentParser.parse_args = real_parse_args
        sys.argv = saved_argv
    raise RuntimeError(f"{entry} returned without parsing arguments")


def _build_root_parser_by_hand():
    """Fallback: build `vllm serve` the way the release's entry point does it."""
    import importlib

    try:
        flex = importlib.import_module("vllm.utils.argparse_utils").FlexibleArgumentParser
    except ImportError:
        flex = importlib.import_module("vllm.utils").FlexibleArgumentParser
    root = flex(description="vLLM CLI")
    subparsers = root.add_subparsers(required=False, dest="subparser")
    try:
        serve_mod = importlib.import_module("vllm.entrypoints.cli.serve")
        serve_mod.ServeSubcommand().subparser_init(subparsers)
        return root, "by hand: ServeSubcommand.subparser_init"
    except (ImportError, AttributeError):
        pass
    from vllm.entrypoints.openai.cli_args import make_arg_parser  # type: ignore

    serve = subparsers.add_parser("serve", usage="vllm serve <model_tag> [options]")
    serve.add_argument("model_tag", type=str)
    serve.add_argument("--config", type=str, default="", required=False)
    make_arg_parser(serve)
    return root, "by hand: scripts.py serve subparser + make_arg_parser"


def _serve_parser(root):
    for action in root._subparsers._group_actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices["serve"]
    raise RuntimeError("no serve subparser")


def _jsonable(value, depth=0):
    import dataclasses
    import enum

    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else repr(value)
    if isinstance(value, enum.Enum):
        return _jsonable(value.value, depth + 1) if depth < 5 else repr(value)
    if depth > 5:
        return _clean_repr(value)
    if isinstance(value, (list, tuple, set, frozenset)):
        items = list(value)
        if isinstance(value, (set, frozenset)):
            items = sorted(items, key=repr)
        return [_jsonable(v, depth + 1) for v in items]
    if isinstance(value, dict):
        return {str(k): _jsonable(v, depth + 1) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # Only what differs from a default-constructed instance (or the field defaults).
        try:
            ref = type(value)()
        except Exception:
            ref = None
        out = {}
        for f in dataclasses.fields(value):
            if not f.init:
                continue
            v = getattr(value, f.name, None)
            if ref is not None:
                d = getattr(ref, f.name, dataclasses.MISSING)
            elif f.default is not dataclasses.MISSING:
                d = f.default
            elif f.default_factory is not dataclasses.MISSING:
                try:
                    d = f.default_factory()
                except Exception:
                    d = dataclasses.MISSING
            else:
                d = dataclasses.MISSING
            try:
                same = v == d
            except Exception:
                same = False
            if not same:
                out[f.name] = _jsonable(v, depth + 1)
        return {"__class__": type(value).__name__, **out}
    return _clean_repr(value)


def _clean_repr(value) -> str:
    text = repr(value)
    text = re.sub(r" at 0x[0-9a-fA-F]+", "", text)
    return text if len(text) <= 300 else text[:297] + "..."


def _type_name(t) -> str | None:
    """A readable name for an argparse `type` callable, unwrapping vLLM's closures."""
    import functools

    if t is None:
        return None
    if isinstance(t, functools.partial):
        return f"partial({_type_name(t.func)})"
    name = getattr(t, "__name__", None) or getattr(t, "__qualname__", None)
    if name is None:
        return type(t).__name__
    inner = []
    for cell in getattr(t, "__closure__", None) or ():
        try:
            c = cell.cell_contents
        except ValueError:
            continue
        if callable(c) and not isinstance(c, (argparse.ArgumentParser,)):
            inner.append(_type_name(c))
    if inner:
        return f"{name}({', '.join(n for n in inner if n)})"
    return name


def _call_type(t, text):
    try:
        return True, t(text)
    except BaseException:  # noqa: BLE001 - a converter may raise anything, even SystemExit
        return False, None


def _kind(action, t) -> str:
    import dataclasses

    cls = type(action).__name__
    if action.nargs == 0 or cls in ("StoreBoolean",) or isinstance(
        action, (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse.BooleanOptionalAction)
    ):
        return "bool"
    if action.nargs in ("+", "*") or (isinstance(action.nargs, int) and action.nargs > 1) or isinstance(
        action, (argparse._AppendAction, argparse._ExtendAction)
    ):
        return "list"
    if t is None:
        return "str"
    if t is bool or (getattr(t, "__name__", "") in ("bool",)):
        return "bool"
    ok, v = _call_type(t, "{}")
    if ok and (isinstance(v, (dict, list)) or dataclasses.is_dataclass(v) or hasattr(v, "model_dump")):
        return "json"
    ok, v = _call_type(t, "8192")
    if ok and isinstance(v, bool):
        return "bool"
    if ok and isinstance(v, int):
        ok_k, vk = _call_type(t, "8k")
        return "human_int" if ok_k and isinstance(vk, int) else "int"
    if ok and isinstance(v, float):
        return "float"
    ok_t, vt = _call_type(t, "true")
    ok_f, vf = _call_type(t, "false")
    if ok_t and ok_f and vt is True and vf is False:
        return "bool"
    ok, v = _call_type(t, "abc")
    if ok and isinstance(v, str):
        return "str"
    return "other"


def _action_entry(action, flags, parser) -> dict:
    cls = type(action).__name__
    name = ACTION_NAMES.get(cls, cls)
    t = action.type
    deprecated = bool(getattr(action, "deprecated", False)) or action in getattr(parser, "_deprecated", ())
    help_text = action.help if isinstance(action.help, str) else ""
    if DEPRECATED_HELP.search(help_text):
        deprecated = True
    choices = None
    if action.choices is not None:
        try:
            choices = [str(c.value) if hasattr(c, "value") else str(c) for c in action.choices]
        except TypeError:
            choices = [_clean_repr(action.choices)]
    extra = {"help": help_text} if os.environ.get("GEN_VLLM_OPTIONS_DEBUG") and "deprecat" in help_text.lower() else {}
    return {
        **extra,
        "flags": flags,
        "action": name,
        "type": _type_name(t),
        "kind": _kind(action, t),
        "nargs": action.nargs,
        "choices": choices,
        "default": _jsonable(action.default),
        "deprecated": deprecated,
    }


def _collect_options(serve) -> dict:
    by_action: dict[int, list[str]] = {}
    actions = {}
    for opt, act in serve._option_string_actions.items():
        by_action.setdefault(id(act), []).append(opt)
        actions[id(act)] = act
    entries: dict[str, dict] = {}
    pending = []
    for act in serve._actions:  # declaration order
        if id(act) not in actions:
            continue  # positionals
        if isinstance(act, (argparse._HelpAction, argparse._VersionAction)):
            continue
        declared = list(act.option_strings)
        extra = sorted(o for o in by_action[id(act)] if o not in declared)
        flags = [o for o in declared if o in by_action[id(act)]] + extra
        pending.append((act, flags))
    by_dest: dict[str, list] = {}
    for act, flags in pending:
        by_dest.setdefault(act.dest, []).append((act, flags))
    for dest, group in by_dest.items():
        canonical = "--" + dest.replace("_", "-")
        group.sort(key=lambda af: (canonical not in af[1], af[0] not in serve._actions and 1))
        for i, (act, flags) in enumerate(group):
            entry = _action_entry(act, flags, serve)
            if i == 0:
                entries[dest] = entry
            else:
                entries[f"{dest}@{flags[0]}"] = {"dest": dest, **entry}
    return entries


class _LogCapture:
    def __init__(self):
        import logging

        self.records: list[str] = []

        class H(logging.Handler):
            def emit(inner, record):
                try:
                    self.records.append(record.getMessage())
                except Exception:
                    self.records.append(str(record.msg))

        self.handler = H(level=logging.WARNING)


def _probe(root, serve, baseline, argv, logcap):
    import contextlib
    import io
    import warnings

    real_error = argparse.ArgumentParser.error

    def error(self, message):
        raise _ParseError(message)

    _clear_warn_once()
    logcap.records.clear()
    argparse.ArgumentParser.error = error
    out = io.StringIO()
    try:
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(out):
            warnings.simplefilter("always")
            ns = root.parse_args(["serve", MODEL, *argv])
    except _ParseError as e:
        return {"ok": False, "error": _clean_error(str(e))}
    except SystemExit as e:
        return {"ok": False, "error": (out.getvalue().strip().splitlines() or [f"exit {e.code}"])[-1]}
    except Exception as e:  # vLLM raising from inside parse_args (ValueError, ...)
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}
    finally:
        argparse.ArgumentParser.error = real_error
    got = vars(ns)
    changed = {}
    for k, v in got.items():
        try:
            same = k in baseline and baseline[k] == v and type(baseline[k]) is type(v)
        except Exception:
            same = False
        if not same:
            changed[k] = v
    changed.pop("subparser", None)
    result: dict = {"ok": True}
    dest = _matched_dest(serve, argv)
    if dest is None and len(changed) == 1:
        dest = next(iter(changed))
    if dest is not None and dest in got:
        result["dest"], result["value"] = dest, _jsonable(got[dest])
        if dest not in changed:
            result["unchanged"] = True  # parsed, but the value equals the default
        others = {k: _jsonable(v) for k, v in sorted(changed.items()) if k != dest}
        if others:
            result["others"] = others
    elif changed:
        result["values"] = {k: _jsonable(v) for k, v in sorted(changed.items())}
    notes = [m for m in logcap.records] + [str(w.message) for w in caught
                                          if issubclass(w.category, (DeprecationWarning, FutureWarning, UserWarning))]
    notes = [re.sub(r"\s+", " ", n).strip()[:300] for n in notes if "deprecat" in n.lower() or "removed" in n.lower()]
    if notes:
        result["warnings"] = sorted(set(notes))
    return result


def _matched_dest(serve, argv):
    """The dest of the action the first option of argv names (for labelling only)."""
    token = next((a for a in argv if a.startswith("-")), None)
    if token is None:
        return None
    key = token.split("=", 1)[0]
    if key.startswith("--"):
        head, dot, tail = key[2:].partition(".")
        key = "--" + head.replace("_", "-")
    table = serve._option_string_actions
    if key in table:
        return table[key].dest
    if key.startswith("--") and serve.allow_abbrev:
        hits = {a.dest for o, a in table.items() if o.startswith(key)}
        if len(hits) == 1:
            return hits.pop()
    return None


def _clean_error(text: str) -> str:
    text = re.sub(r" at 0x[0-9a-fA-F]+", "", text)
    text = re.sub(r"\n\s*For further information visit https://errors\.pydantic\.dev/\S+", "", text)
    return text.strip()


def _clear_warn_once():
    mod = sys.modules.get("vllm.logger")
    if mod is None:
        return
    for value in vars(mod).values():
        clear = getattr(value, "cache_clear", None)
        if callable(clear) and getattr(value, "__module__", "") == "vllm.logger":
            clear()


def _parser_features(root, serve, probe_results) -> dict:
    import yaml

    feats = {
        "allow_abbrev": bool(serve.allow_abbrev),
        "root_allow_abbrev": bool(root.allow_abbrev),
        "parser_class": type(serve).__name__,
    }
    u = probe_results.get("--max_model_len 4096", {})
    feats["underscore_to_dash"] = bool(u.get("ok"))
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as fh:
        yaml.safe_dump({"max-model-len": 1234, "max_num_seqs": 7}, fh)
        cfg = fh.name
    logcap = _LogCapture()
    baseline = vars(_quiet_parse(root, ["serve", MODEL]))
    r = _probe(root, serve, baseline, ["--config", cfg], logcap)
    os.unlink(cfg)
    vals = {**r.get("values", {}), **r.get("others", {})}
    if "dest" in r:
        vals[r["dest"]] = r["value"]
    feats["config_file"] = bool(r.get("ok") and vals.get("max_model_len") == 1234)
    feats["config_file_underscore_keys"] = bool(r.get("ok") and vals.get("max_num_seqs") == 7)
    feats["dotted_json"] = any(
        probe_results.get(p, {}).get("ok") for p in ("--compilation-config.level 3", "--compilation-config.mode 3")
    )
    feats["dash_O"] = bool(probe_results.get("-O3", {}).get("ok"))
    return feats


def _quiet_parse(root, argv):
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return root.parse_args(argv)


def worker(src: Path, release: str, result_file: Path, mode: str = "main") -> None:
    import logging
    import shlex
    import traceback

    sys.path[:] = [str(src)] + [p for p in sys.path if p and Path(p).resolve() != Path(__file__).resolve().parent]
    req_versions = _requirement_versions(src)
    _install_stubs(release, req_versions)
    entry = _entry_point(src)
    how = f"entry point {entry}"
    if mode == "help":
        try:
            serve = _serve_parser(_capture_root_parser(entry, help_pass=True))
        except Exception:
            result_file.write_text(json.dumps({"error": traceback.format_exc(limit=-3)}))
            return
        says = {}
        for act in serve._actions:
            text = act.help if isinstance(act.help, str) else ""
            says[act.dest] = says.get(act.dest, False) or bool(DEPRECATED_HELP.search(text))
        result_file.write_text(json.dumps({"help_deprecated": says, "degraded": DEGRADED}))
        return
    try:
        root = _capture_root_parser(entry)
    except Exception:
        first = traceback.format_exc(limit=-3)
        try:
            root, how = _build_root_parser_by_hand()
            how += f" (entry point {entry} failed: {first.strip().splitlines()[-1]})"
        except Exception:
            result_file.write_text(json.dumps({"error": first + "\n" + traceback.format_exc(limit=-3)
                                               + "\nDEGRADED: " + json.dumps(DEGRADED, indent=0)}))
            return
    serve = _serve_parser(root)
    logcap = _LogCapture()
    logging.getLogger("vllm").addHandler(logcap.handler)
    logging.getLogger().addHandler(logcap.handler)
    baseline = vars(_quiet_parse(root, ["serve", MODEL]))
    options = _collect_options(serve)
    probes = {p: _probe(root, serve, baseline, shlex.split(p), logcap) for p in PROBES}
    feats = _parser_features(root, serve, probes)
    result_file.write_text(json.dumps({"options": options, "probes": probes, "parser": feats, "how": how,
                                       "degraded": DEGRADED, "stub_versions": req_versions}))


# ----------------------------------------------------------------------------------------------
# Driver side.
# ----------------------------------------------------------------------------------------------


def _version_key(v: str):
    from packaging.version import Version

    return Version(v)


def find_releases(root: Path) -> dict[str, Path]:
    """Unpacked sdists under root: directories `vllm-<version>` holding `vllm/__init__.py`."""
    found: dict[str, Path] = {}
    for depth in ("vllm-*", "*/vllm-*", "*/*/vllm-*"):
        for d in root.glob(depth):
            if d.is_dir() and (d / "vllm" / "__init__.py").is_file():
                found.setdefault(d.name[len("vllm-"):], d)
    return found


def download(root: Path, minimum: str, skip: frozenset[str] = frozenset()) -> dict[str, str]:
    """Fetch every release's sdist (from ``minimum`` on, except those in ``skip``) from PyPI's
    JSON API, check it and unpack its Python parts. Returns the releases without an sdist."""
    import hashlib
    import tarfile
    import urllib.request
    from urllib.parse import urljoin

    from packaging.version import Version

    api = "https://pypi.org/pypi/vllm/json"
    meta = json.load(urllib.request.urlopen(api, timeout=60))
    missing = {}
    (root / "dl").mkdir(parents=True, exist_ok=True)
    for version, files in sorted(meta["releases"].items(), key=lambda kv: Version(kv[0])):
        if Version(version) < Version(minimum) or Version(version).is_prerelease or version in skip:
            continue
        sdists = [f for f in files if f["packagetype"] == "sdist" and not f.get("yanked")]
        if not sdists:
            missing[version] = "no sdist on PyPI (wheels only)" if files else "no files on PyPI"
            continue
        f = sdists[0]
        path = root / "dl" / f["filename"]
        if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != f["digests"]["sha256"]:
            print(f"downloading {f['filename']}", file=sys.stderr)
            data = urllib.request.urlopen(urljoin(api, f["url"]), timeout=600).read()
            if hashlib.sha256(data).hexdigest() != f["digests"]["sha256"]:
                raise SystemExit(f"sha256 mismatch for {f['filename']}")
            path.write_bytes(data)
        dest = root / "src" / version
        marker = dest / ".unpacked"
        if not marker.is_file():
            with tarfile.open(path) as tar:
                members = [
                    m for m in tar.getmembers()
                    if m.isfile() and (
                        re.fullmatch(r"[^/]+/vllm/.*\.py", m.name)
                        or re.fullmatch(r"[^/]+/(setup\.py|pyproject\.toml)", m.name)
                        or re.fullmatch(r"[^/]+/requirements[^/]*(/[^/]+)?\.txt", m.name)
                    )
                ]
                tar.extractall(dest, members=members, filter="data")
            marker.write_text(f["digests"]["sha256"] + "\n")
    (root / "missing.json").write_text(json.dumps(missing, indent=1) + "\n")
    return missing


def _run_worker(version: str, src: Path, keep: Path | None, timeout: int, mode: str, seed: int = 0) -> dict:
    suffix = ("" if mode == "main" else f".{mode}") + (f".seed{seed}" if seed else "")
    if REUSE is not None and (REUSE / f"{version}{suffix}.json").is_file():
        return json.loads((REUSE / f"{version}{suffix}.json").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "result.json"
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": "/home/user",
            "LANG": "C.UTF-8",
            "TMPDIR": tmp,
            "VLLM_LOGGING_LEVEL": "WARNING",
            "VLLM_NO_USAGE_STATS": "1",
            "VLLM_DO_NOT_TRACK": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "PYTHONHASHSEED": str(seed),
        }
        if os.environ.get("GEN_VLLM_OPTIONS_DEBUG"):
            env["GEN_VLLM_OPTIONS_DEBUG"] = "1"
        cmd = [sys.executable, "-X", "utf8", os.path.abspath(__file__), "--worker", str(src), version, str(result),
               mode]
        try:
            proc = subprocess.run(cmd, cwd=tmp, env=env, capture_output=True, text=True, timeout=timeout)
            log = proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as e:
            return {"error": f"timed out after {timeout} s", "log": str(e.stdout or "")[-2000:]}
        if keep:
            keep.mkdir(parents=True, exist_ok=True)
            (keep / f"{version}{suffix}.log").write_text(log)
            if result.is_file():
                (keep / f"{version}{suffix}.json").write_text(result.read_text())
        if not result.is_file():
            tail = log.strip().splitlines()[-5:]
            return {"error": f"worker exited {proc.returncode}: " + " | ".join(tail)}
        return json.loads(result.read_text())


DATA_FILE = Path(__file__).resolve().parent.parent / "sits_doctor" / "frameworks" / "data" / "vllm_options.json"

# --reuse DIR: read a worker's raw result from DIR (written there earlier by --keep) instead of
# running it again, e.g. to re-assemble the JSON after changing how it is written.
REUSE: Path | None = None


def run_release(version: str, src: Path, keep: Path | None, timeout: int, seeds: int = 8) -> dict:
    """The main pass (options, probes) in ``seeds`` processes (PYTHONHASHSEED 0..seeds-1) to find
    what varies from one process to the next, plus the help pass (help texts saying
    "deprecated").

    Some releases build choices by iterating a set of type hints (0.8.5:
    ``Union[Literal[V0 backends], Literal[V1 backends]]`` for --guided-decoding-backend), so the
    real ``vllm serve`` gets different choices in different processes. Such entries keep one
    result (the first in JSON order) and get ``"varies_between_runs": true`` and
    ``"alternatives"`` (the other entries seen, whole; ``null`` where the option or probe result
    was absent). With 8 processes a 50/50 variation goes unseen with p < 1%."""
    result = _run_worker(version, src, keep, timeout, "main", 0)
    if "error" in result:
        return result
    others = []
    for seed in range(1, seeds):
        other = _run_worker(version, src, keep, timeout, "main", seed)
        if "error" in other:
            result["how"] += f"; seed {seed} failed ({other['error'].strip().splitlines()[-1][:200]})"
            continue
        others.append(other)
    for table in ("options", "probes"):
        base = result[table]
        for key in sorted(set(base).union(*(o[table] for o in others))):
            seen = [base.get(key)] + [o[table].get(key) for o in others]
            distinct = []
            for entry in seen:
                if entry not in distinct:
                    distinct.append(entry)
            if len(distinct) == 1:
                continue
            # which result a given process gets is not even fixed by the seed (hashes of types
            # follow their addresses), so the first in a fixed order is the one written
            canonical = min((e for e in distinct if e is not None), key=lambda e: json.dumps(e, sort_keys=True))
            alternatives = [e for e in distinct if e is not canonical]
            base[key] = {**canonical, "varies_between_runs": True, "alternatives": alternatives}
    helped = _run_worker(version, src, keep, timeout, "help")
    if "error" in helped:
        result["how"] += f"; help pass failed ({helped['error'].strip().splitlines()[-1][:200]})"
        return result
    says = helped["help_deprecated"]
    for key, entry in result["options"].items():
        if says.get(entry.get("dest") or key):
            entry["deprecated"] = True
            for alt in entry.get("alternatives") or ():
                if alt is not None:
                    alt["deprecated"] = True
    for name, err in helped.get("degraded", {}).items():
        result["degraded"].setdefault(name, err)
    return result


def _segments(releases: list[str], per_release: dict[str, object]) -> list[dict]:
    """Contiguous runs of identical (JSON-equal) values; releases without a value break a run."""
    out: list[dict] = []
    prev_key = None
    for v in releases:
        if v not in per_release:
            prev_key = None
            continue
        value = per_release[v]
        key = json.dumps(value, sort_keys=True)
        if out and key == prev_key:
            out[-1]["last"] = v
        else:
            out.append({"first": v, "last": v, **value})
        prev_key = key
    return out


def per_release(results: dict[str, dict], lib_versions: str) -> dict[str, dict]:
    """Each release's parser facts, options and probes as written into the table (before the
    releases are folded into segments): ``{version: {"parser": {...}, "options": {...},
    "probes": {...}}}``. Releases whose worker failed are left out."""
    out: dict[str, dict] = {}
    for v, r in results.items():
        if "error" in r:
            continue
        feats = dict(r["parser"])
        parser = {
            "allow_abbrev": feats.pop("allow_abbrev"),
            **feats,
            "notes": f"{r['how']}; degraded vLLM modules: "
                     f"{', '.join(f'{m} ({e})' for m, e in sorted(r.get('degraded', {}).items())) or 'none'}; "
                     f"{lib_versions}",
        }
        out[v] = {"parser": parser, "options": r["options"],
                  "probes": {p: r["probes"][p] for p in PROBES if p in r["probes"]}}
    return out


def unfold(data: dict) -> dict[str, dict]:
    """The inverse of :func:`fold`: a committed table back into per-release entries, so that
    new releases can be added without running the old ones again."""
    releases = data["releases"]
    index = {v: i for i, v in enumerate(releases)}
    out: dict[str, dict] = {v: {"parser": None, "options": {}, "probes": {}} for v in releases}

    def spread(segments):
        for seg in segments:
            body = {k: val for k, val in seg.items() if k not in ("first", "last")}
            for v in releases[index[seg["first"]]: index[seg["last"]] + 1]:
                yield v, body

    for v, body in spread(data["parser"]):
        out[v]["parser"] = body
    for table in ("options", "probes"):
        for key, segments in data[table].items():
            for v, body in spread(segments):
                out[v][table][key] = body
    return out


def fold(per: dict[str, dict], failed: dict[str, str]) -> dict:
    """Per-release entries folded into the committed table: contiguous runs of identical
    entries become one segment."""
    releases = sorted(per, key=_version_key)
    failed = {v: why for v, why in failed.items() if v not in per}
    option_names = sorted({k for v in releases for k in per[v]["options"]})
    probe_names = PROBES + sorted({p for v in releases for p in per[v]["probes"]} - set(PROBES))
    return {
        "generator": "tools/gen_vllm_options.py",
        "releases": releases,
        "failed": dict(sorted(failed.items(), key=lambda kv: _version_key(kv[0]))),
        "parser": _segments(releases, {v: per[v]["parser"] for v in releases}),
        "options": {k: _segments(releases, {v: per[v]["options"][k] for v in releases if k in per[v]["options"]})
                    for k in option_names},
        "probes": {p: _segments(releases, {v: per[v]["probes"][p] for v in releases if p in per[v]["probes"]})
                   for p in probe_names},
    }


def assemble(results: dict[str, dict], failed: dict[str, str], lib_versions: str) -> dict:
    failed = dict(failed)
    for v, r in results.items():
        if "error" in r:
            failed[v] = r["error"][-1500:]
    return fold(per_release(results, lib_versions), failed)


def dump(data: dict) -> str:
    """Compact JSON, one segment per line so that diffs between runs stay readable."""
    lines = ["{"]
    top = list(data.items())
    for i, (key, value) in enumerate(top):
        comma = "," if i < len(top) - 1 else ""
        if key in ("options", "probes"):
            lines.append(f" {json.dumps(key)}: {{")
            items = list(value.items())
            for j, (name, segs) in enumerate(items):
                c2 = "," if j < len(items) - 1 else ""
                lines.append(f"  {json.dumps(name)}: [")
                for k, seg in enumerate(segs):
                    c3 = "," if k < len(segs) - 1 else ""
                    lines.append("   " + json.dumps(seg, separators=(",", ":")) + c3)
                lines.append(f"  ]{c2}")
            lines.append(f" }}{comma}")
        elif key == "parser":
            lines.append(f" {json.dumps(key)}: [")
            for k, seg in enumerate(value):
                c3 = "," if k < len(value) - 1 else ""
                lines.append("  " + json.dumps(seg, separators=(",", ":")) + c3)
            lines.append(f" ]{comma}")
        else:
            lines.append(f" {json.dumps(key)}: {json.dumps(value, separators=(',', ':'))}{comma}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _lib_versions() -> str:
    import importlib.metadata as md

    parts = [f"python {sys.version.split()[0]}"]
    for name in ("pydantic", "pyyaml", "regex", "msgspec", "numpy", "packaging"):
        try:
            parts.append(f"{name} {md.version(name)}")
        except md.PackageNotFoundError:
            parts.append(f"{name} missing")
    return ", ".join(parts)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--worker"]:
        worker(Path(argv[1]), argv[2], Path(argv[3]), *argv[4:5])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sdists", type=Path, required=True, help="folder holding the unpacked sdists")
    ap.add_argument("--out", type=Path, default=DATA_FILE if "--update" in argv else None,
                    help="JSON file to write (with --update: the table to extend, by default the committed one)")
    ap.add_argument("--download", action="store_true", help="fetch + unpack sdists from PyPI first")
    ap.add_argument("--min", default="0.6.0", help="oldest release to use (default 0.6.0)")
    ap.add_argument("--only", help="comma-separated releases to run (prints, does not write)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=600, help="seconds per release")
    ap.add_argument("--keep", type=Path, help="keep raw per-release results and logs here")
    ap.add_argument("--reuse", type=Path, help="take raw per-release results from this --keep folder")
    ap.add_argument("--update", action="store_true",
                    help="add only the releases on PyPI that --out lacks (downloads them into --sdists)")
    ap.add_argument("--seeds", type=int, default=8,
                    help="PYTHONHASHSEEDs 0..N-1 to run the main pass under (default 8)")
    args = ap.parse_args(argv)
    global REUSE
    REUSE = args.reuse
    if args.update:
        return update(args)
    if args.download:
        download(args.sdists, args.min)
    found = find_releases(args.sdists)
    versions = sorted((v for v in found if _version_key(v) >= _version_key(args.min)), key=_version_key)
    if args.only:
        versions = [v for v in args.only.split(",") if v in found]
    failed: dict[str, str] = {}
    missing = args.sdists / "missing.json"
    if missing.is_file() and not args.only:
        failed.update(json.loads(missing.read_text()))
    results = _run_all(versions, found, args)
    data = assemble(results, failed, _lib_versions())
    if args.out and not args.only:
        _write(args.out, data)
    else:
        print(json.dumps({"releases": data["releases"], "failed": data["failed"],
                          "parser": data["parser"]}, indent=1))
    return 0


def _run_all(versions: list[str], found: dict[str, Path], args) -> dict[str, dict]:
    from concurrent.futures import ThreadPoolExecutor

    def one(v):
        r = run_release(v, found[v], args.keep, args.timeout, args.seeds)
        status = r["error"][:300] if "error" in r else f"{len(r['options'])} options"
        print(f"{v}: {status}", file=sys.stderr, flush=True)
        return v, r

    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        return dict(pool.map(one, versions))


def _write(out: Path, data: dict) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dump(data))
    print(f"wrote {out} ({out.stat().st_size} bytes, {len(data['releases'])} releases, "
          f"{len(data['failed'])} failed)", file=sys.stderr)


def update(args) -> int:
    """Add the releases on PyPI that the committed table lacks, keeping its other entries.

    The newest release already in the table is run again as a control: if this machine's run of
    it differs from the committed entries (another interpreter or pydantic, a generator change),
    nothing is written, since the new releases would be judged differently from the old ones;
    then regenerate every release (the commands in the module docstring)."""
    out = args.out
    data = json.loads(out.read_text(encoding="utf-8"))
    known = frozenset(data["releases"]) | frozenset(data["failed"])
    control = data["releases"][-1]
    missing = download(args.sdists, args.min, skip=known - {control})
    found = find_releases(args.sdists)
    new = sorted((v for v in found if v not in known and _version_key(v) >= _version_key(args.min)),
                 key=_version_key)
    missing = {v: why for v, why in missing.items() if v not in known}
    if not new and not missing:
        print(f"{out}: no release newer than the table's on PyPI (newest {control})", file=sys.stderr)
        return 0
    results = _run_all([control] + new, found, args)
    per = unfold(data)
    again = per_release({control: results[control]}, _lib_versions()).get(control)
    if again != per[control]:
        diff = sorted(k for t in ("options", "probes") for k in set(per[control][t]) | set((again or {}).get(t, {}))
                      if per[control][t].get(k) != (again or {}).get(t, {}).get(k))
        print(f"control run of {control} differs from the committed table "
              f"({'parser' if again and again['parser'] != per[control]['parser'] else ''} {diff[:10]}): "
              "not written; regenerate every release instead", file=sys.stderr)
        return 1
    failed = dict(data["failed"], **missing)
    for v in new:
        if "error" in results[v]:
            failed[v] = results[v]["error"][-1500:]
    per.update(per_release({v: results[v] for v in new}, _lib_versions()))
    _write(out, fold(per, failed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
