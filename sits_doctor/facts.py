"""Effective facts: what a deployment will really run with, typed and the same for every
framework, each value with where it came from.

A :class:`Value` is a value plus its :class:`~sits_doctor.plan.Provenance`: a file position
(the setting that wrote it), ``default of vLLM 0.33.0 (vllm/engine/arg_utils.py)``, or
``derived: ...``. Framework modules build :class:`Facts` from a Plan once its target version is
known (``sits_doctor.frameworks.<fw>.effective``); rules read them and never walk raw config
dicts. A field that nothing sets and whose default sits-doctor does not know is ``None``.

Serving facts are typed once, by :func:`validated` (each framework's ``effective`` returns its
Serving through it): a field holds a value of its kind (:data:`SERVING_KINDS`), or an
:class:`Invalid` that keeps what was written and why it is no such value. SITS201 reports a
value the framework's parser rejects; the memory rules say they did not check a deployment
whose sizing facts are invalid; no rule computes with a written value it did not validate.
"""

import math
import re
from types import MappingProxyType
from typing import Any, Mapping, NamedTuple

from sits_doctor.plan import Provenance, Setting


class Invalid(NamedTuple):
    """A written value that is not of the kind its fact holds: ``abc`` for a count, ``.nan`` for
    a fraction, ``0`` tensor-parallel ranks. Its ``repr`` is the value as written."""

    written: Any
    why: str  # "not an integer", "not a finite number", "below 1", ...

    def __repr__(self) -> str:
        return repr(self.written)

    def __str__(self) -> str:
        return str(self.written)


class Value(NamedTuple):
    value: Any
    prov: Provenance
    setting: Setting | None = None  # the setting that wrote it, when a file did (fixes edit it)

    @classmethod
    def of(cls, setting: Setting, value: Any = None) -> "Value":
        return cls(setting.value if value is None else value, setting.prov, setting)

    @classmethod
    def default(cls, value: Any, note: str) -> "Value":
        return cls(value, Provenance.default(note))

    @classmethod
    def derived(cls, value: Any, note: str) -> "Value":
        return cls(value, Provenance.derived(note))

    @property
    def is_set(self) -> bool:
        """Written in a file (not a default or a derivation)."""
        return self.prov.kind == "file"

    @property
    def valid(self) -> bool:
        """Of the kind its fact holds (not an :class:`Invalid`)."""
        return not isinstance(self.value, Invalid)

    def __str__(self) -> str:
        return f"{self.value} ({self.prov})"


class ModelDims(NamedTuple):
    """A model's shape, from its config.json (``get_text_config()`` for multimodal models)."""

    architecture: Value | None = None
    model_type: Value | None = None
    layers: Value | None = None
    hidden: Value | None = None
    heads: Value | None = None
    kv_heads: Value | None = None
    head_dim: Value | None = None
    intermediate: Value | None = None
    vocab: Value | None = None
    max_positions: Value | None = None  # the length key and its value as written
    rope: Value | None = None  # the rope parameters mapping (rope_scaling / rope_parameters)
    rope_theta: Value | None = None
    sliding_window: Value | None = None
    attention_chunk: Value | None = None  # Llama 4's attention_chunk_size: the window of its "chunked_attention" layers
    layer_types: Value | None = None
    experts: Value | None = None
    experts_per_token: Value | None = None
    shared_experts: Value | None = None
    kv_lora_rank: Value | None = None  # MLA
    qk_rope_head_dim: Value | None = None  # MLA
    q_lora_rank: Value | None = None  # MLA
    qk_nope_head_dim: Value | None = None  # MLA
    v_head_dim: Value | None = None  # MLA
    moe_intermediate: Value | None = None  # size of one expert's MLP
    shared_intermediate: Value | None = None  # Qwen2-MoE's shared expert
    first_dense_layers: Value | None = None  # DeepSeek first_k_dense_replace
    dtype: Value | None = None
    quantization: Value | None = None  # quantization_config.quant_method
    params: Value | None = None  # parameter count (derived)
    param_parts: Value | None = None  # {"embeddings", "attention", "experts", "mlp"} (derived)
    weight_scheme: Value | None = None  # the stored weight format (fp8, int4, nvfp4 ...) read from quantization_config
    stored_bytes: Value | None = None  # the checkpoint's size from model.safetensors.index.json, when beside the config
    # how the checkpoint scales its input activations (an ActivationScales, at the key that decides it);
    # None: activations are not quantized (weight-only, or no quantization_config)
    activation_scales: Value | None = None
    # where the checkpoint says it is quantized and who reads that (a CheckpointQuant); None: not quantized
    checkpoint_quant: Value | None = None


class CheckpointQuant(NamedTuple):
    """Where a checkpoint says how its weights are stored, read once for every rule and for
    ``capacity`` (sits_doctor.frameworks.transformers.checkpoint_quant)."""

    method: str  # quant_method as the loaders normalise it ("modelopt" for a ModelOpt recipe, "gptq" for AutoGPTQ)
    weights: str  # the stored weight format sits_doctor.memory weighs ("fp8", "int4", "unknown" ...)
    where: str  # "quantization_config" (config.json), "hf_quant_config.json" or "quantize_config.json"
    declared: bool  # False: a config.json quantization_config that names no quant_method


class ActivationScales(NamedTuple):
    """How a quantized checkpoint scales the activations it quantizes, as its quantization config
    says (sits_doctor.frameworks.transformers.activation_scales)."""

    static: bool  # True: scales calibrated once and stored with the weights; False: computed from each batch
    granularity: str  # "tensor", "token", "tensor_group", ... as the config names it ("tensor" for static FP8)
    scheme: str  # how messages name it: "fp8 activation_scheme static", "ModelOpt quant_algo FP8", ...
    method: str  # "fp8", "compressed-tensors", "modelopt", "trtllm": which table knows its dynamic twin
    name: str = ""  # what decides it: the config group (compressed-tensors), the quant_algo (ModelOpt, TensorRT-LLM)


class Serving(NamedTuple):
    """How the server runs the model."""

    max_model_len: Value | None = None
    max_num_seqs: Value | None = None  # vLLM max_num_seqs, TRT-LLM max_batch_size, ORT batch_size
    max_num_batched_tokens: Value | None = None
    kv_cache_dtype: Value | None = None
    block_size: Value | None = None
    tensor_parallel: Value | None = None
    pipeline_parallel: Value | None = None
    data_parallel: Value | None = None
    expert_parallel: Value | None = None
    memory_fraction: Value | None = None  # vLLM of total, TRT-LLM of free memory: see its note
    enforce_eager: Value | None = None
    cuda_graphs: Value | None = None  # on/off
    cudagraph_mode: Value | None = None
    capture_sizes: Value | None = None
    max_capture_size: Value | None = None
    attention_backend: Value | None = None
    prefix_caching: Value | None = None
    chunked_prefill: Value | None = None
    speculative: Value | None = None
    kv_cache_bytes: Value | None = None  # vLLM kv_cache_memory_bytes: the pool's size, set directly
    kv_cache_tokens: Value | None = None  # TRT-LLM kv_cache_config.max_tokens: a cap on the pool
    max_input_len: Value | None = None  # TRT-LLM: the longest prompt (a shrunk window must still hold it)

    @property
    def invalid(self) -> tuple[tuple[str, Value], ...]:
        """(field, value) of every field whose written value is not of its kind."""
        return tuple((name, x) for name, x in zip(self._fields, self) if isinstance(x, Value) and not x.valid)


# --- the validated-facts step ------------------------------------------------------------------
# What each Serving field holds once validated: "count" an int ≥ 1 (a length, a size, a number
# of ranks), "number" a finite float, "bool" True / False, "text" a str. Fields not named
# here (capture sizes, the speculative config) hold what the framework reads, as written.
def field_names(*fields) -> tuple[str, ...]:
    """The names of Serving fields given as ``Serving.<field>`` (code names a field by its
    attribute: several are spelt as vLLM options are, and option names live in frameworks/)."""
    names = {id(getattr(Serving, name)): name for name in Serving._fields}
    return tuple(names[id(f)] for f in fields)


_KINDS = {
    "count": (Serving.max_model_len, Serving.max_num_seqs, Serving.max_num_batched_tokens, Serving.block_size,
              Serving.tensor_parallel, Serving.pipeline_parallel, Serving.data_parallel, Serving.max_capture_size,
              Serving.kv_cache_bytes, Serving.kv_cache_tokens, Serving.max_input_len),
    "number": (Serving.memory_fraction,),
    "bool": (Serving.enforce_eager, Serving.cuda_graphs, Serving.expert_parallel, Serving.prefix_caching,
             Serving.chunked_prefill),
    "text": (Serving.kv_cache_dtype, Serving.attention_backend),
}
SERVING_KINDS = {name: kind for kind, fields in _KINDS.items() for name in field_names(*fields)}
# The largest integer a fact holds: a C int64 (what the engines' tensors and C++ take); beyond it
# the memory arithmetic would overflow floats or claim sizes no engine reaches.
INT_LIMIT = 2**63 - 1
_INT_TEXT = re.compile(r"\s*[-+]?\d{1,19}\s*")


def typed(value: Any, kind: str) -> Any:
    """``value`` as a fact of ``kind`` (:data:`SERVING_KINDS`), or an :class:`Invalid` saying why
    it is none. Numbers written as text (``"8192"``) are read as the numbers they spell; None
    stays None (not set)."""
    if value is None or isinstance(value, Invalid):
        return value
    if kind == "bool":
        return value if isinstance(value, bool) else Invalid(value, "not true or false")
    if kind == "text":
        return value if isinstance(value, str) else Invalid(value, "not a name")
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return Invalid(value, "not a number")
    if kind == "number":
        try:
            number = float(value)
        except ValueError:
            return Invalid(value, "not a number")
        except OverflowError:  # an int past the floats
            return Invalid(value, "not a finite number")
        return number if math.isfinite(number) else Invalid(value, "not a finite number")
    if isinstance(value, str):
        if not _INT_TEXT.fullmatch(value):
            return Invalid(value, "not an integer")
        number = int(value)
    elif isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            return Invalid(value, "not an integer")
        number = int(value)
    else:
        number = value
    if abs(number) > INT_LIMIT:
        return Invalid(value, f"past {INT_LIMIT}, the largest integer sits-doctor sizes with")
    if number < 1:
        return Invalid(value, "below 1")
    return number


def validated(serving: "Serving") -> "Serving":
    """``serving`` with every field of :data:`SERVING_KINDS` typed (:func:`typed`): the one step
    each framework's ``effective`` returns its Serving facts through."""
    changes = {}
    for name, kind in SERVING_KINDS.items():
        x = getattr(serving, name)
        if x is None:
            continue
        value = typed(x.value, kind)
        if value is not x.value:
            changes[name] = x._replace(value=value)
    return serving._replace(**changes) if changes else serving


class GpuSpec(NamedTuple):
    """The GPU a deployment runs on (sits_doctor/catalogs/gpus.json, or ``--gpu-memory``)."""

    name: str
    count: int = 1
    memory_gib: float | None = None  # total per GPU, as the framework sees it
    source: str = ""  # where the memory figure comes from
    note: str = ""  # which catalog entry an ambiguous name was taken as
    estimate: bool = False  # the memory figure is estimated from the marketed size


LIVE_HOW = "live model in this process"  # Runtime.how of sits_doctor.runtime_hf.live
TABLES_HOW = "tables for transformers"  # Runtime.how of frameworks.transformers.runtime_from_tables


class Runtime(NamedTuple):
    """What a framework runs for a model, as opposed to what its config asks for: found by
    building the model with the installed framework (``check --runtime``), or from version tables.
    A field neither can tell is ``None``."""

    attention: Value | None = None  # the attention implementation that runs: "sdpa", "eager", ...
    supports_sdpa: Value | None = None  # the model class has an SDPA path
    rope: Value | None = None  # where cos/sin are built: "model" (once per forward), "attention" (every layer), "none"
    rotary_modules: tuple[str, ...] = ()  # module paths, "*" for a decoder layer's index
    cache: Value | None = None  # the KV cache class generate() builds
    quantizer: Value | None = None  # the quantization integration that loads the checkpoint
    model_class: str | None = None
    how: str = ""  # "built with transformers 5.24.0 on the meta device" | "tables for transformers 5.24.0"
    custom_code: bool = False  # the config names code from the model repository (never run) and transformers has no class of its own
    # the config names repository code (auto_map) but transformers has its own class for the model_type, which it
    # uses unless trust_remote_code=True is passed (dynamic_module_utils.resolve_trust_remote_code): what is described
    native_over_remote: bool = False
    # added for check_model (live models) and the attention rules; None where nothing says:
    dtype: Value | None = None  # the weights' dtype: "bfloat16", "float32" (fp32 SDPA has no flash kernel)
    device: Value | None = None  # where a live model's parameters are: "cuda:0", "cpu" (None when built on meta)

    @property
    def live(self) -> bool:
        """Read off a model already built in this process (``sits_doctor.check_model``): what it
        runs was chosen by from_pretrained's arguments and later calls, not by its config.json."""
        return self.how.startswith(LIVE_HOW)


class Facts(NamedTuple):
    model: ModelDims | None = None
    serving: Serving | None = None
    gpu: GpuSpec | None = None
    missing: Mapping[str, str] = MappingProxyType({})  # "model" -> why it is unknown
    runtime: Runtime | None = None  # Hugging Face model configs: what transformers runs for it
