"""What vLLM derives from a model config, version by version.

``derived_max_model_len`` mirrors ``_get_and_verify_max_len`` (vllm/config/model.py; vllm/config.py
before 0.10.2), read in the vLLM source releases 0.6.6.post1 … 0.33.0:

1. the smallest of the length keys present in the text config; a truthy ``model_max_length``
   then overrides it (Command-R style);
2. ``--disable-sliding-window`` lowers it to ``sliding_window``;
3. RoPE: unless ``"gemma3"`` is in ``model_type`` (≥0.8), each rope-parameter set whose type is
   not exempt sets the factor (the last one wins) and the result is multiplied once. Exempt:
   ``su, longrope, llama3``; from 0.30.0 also ``yarn, deepseek_yarn, deepseek_llama_scaling``.
   Up to 0.29, YaRN starts from ``original_max_position_embeddings`` before multiplying.
   ``rope_parameters`` (transformers v5, maybe nested per layer type) is read from 0.12.0;
   ``rope_scaling`` before. A null factor counts as 1.0.
"""

from __future__ import annotations


from sits_doctor.frameworks import vllm as fw
from sits_doctor.plan import ModelFacts, Setting
from sits_doctor.versions import V

LENGTH_KEYS = (
    "max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
    "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len",
)
# transformers' ALLOWED_LAYER_TYPES: keys of a per-layer-type (nested) rope_parameters.
LAYER_TYPES = frozenset(
    {"full_attention", "sliding_attention", "chunked_attention", "linear_attention",
     "compressed_sparse_attention", "heavily_compressed_attention", "mamba", "conv"}
)
_EXEMPT = ("su", "longrope", "llama3")  # rope types whose max_position_embeddings is already scaled
_EXEMPT_FROM_0_30 = _EXEMPT + ("yarn", "deepseek_yarn", "deepseek_llama_scaling")
DEFAULT_WHEN_UNKNOWN = 2048


class DerivedLen:
    """vLLM's derived max_model_len, with the key its error message names and how it was found."""

    def __init__(self, value: float, key: str, steps: list[str] | None = None, model_max_length: int | None = None):
        self.value = value
        self.key = key  # the config key vLLM names in its error message
        self.steps = [] if steps is None else steps  # human-readable derivation, with positions
        self.model_max_length = model_max_length

    def __repr__(self) -> str:
        return f"DerivedLen({self.value!r}, {self.key!r}, {self.steps!r}, {self.model_max_length!r})"


def is_length(value) -> bool:
    """A usable length: a positive number the model facts accept (not a bool, not NaN/inf, not
    -1, not past transformers.MAX_NUMBER)."""
    from sits_doctor.frameworks.transformers import usable_number

    return usable_number("max_position_embeddings", value) and value > 0


def derived_max_model_len(model: ModelFacts, version: str, *, disable_sliding_window: bool = False) -> DerivedLen:
    ver = V(version)
    present = [(k, model.fact(k)) for k in LENGTH_KEYS]
    present = [(k, s) for k, s in present if s is not None and is_length(s.value)]
    if present:
        key, setting = min(present, key=lambda ks: ks[1].value)
        out = DerivedLen(setting.value, key, [f"{key} = {setting.value} ({setting.prov})"])
    else:
        out = DerivedLen(float("inf"), "max_position_embeddings")
    mml = model.fact("model_max_length")
    if mml is not None and isinstance(mml.value, int) and is_length(mml.value):
        out.model_max_length = mml.value
        if out.key != "model_max_length":
            out.value, out.key = mml.value, "model_max_length"
            out.steps.append(f"model_max_length = {mml.value} overrides ({mml.prov})")
    window = model.fact("sliding_window")
    if disable_sliding_window and window is not None and isinstance(window.value, int) and window.value < out.value:
        out.value, out.key = window.value, "sliding_window"
        out.steps.append(f"--disable-sliding-window: sliding_window = {window.value} ({window.prov})")
    if out.value == float("inf"):
        # vLLM keeps a user-given max_model_len as is; only an unset one becomes 2048.
        out.steps.append(f"no length key in the config: vLLM takes a given max_model_len as is "
                         f"(an unset one becomes {DEFAULT_WHEN_UNKNOWN})")
        return out
    _apply_rope(model, ver, out)
    return out


def _rope_sets(model: ModelFacts, ver) -> tuple[Setting | None, list[dict]]:
    names = ("rope_parameters", "rope_scaling") if ver >= V(fw.ROPE_PARAMETERS) else ("rope_scaling",)
    for name in names:
        s = model.fact(name)
        if s is not None and isinstance(s.value, dict) and s.value:
            value = s.value
            if set(value) <= LAYER_TYPES and all(isinstance(v, (dict, type(None))) for v in value.values()):
                return s, [v for v in value.values() if isinstance(v, dict)]
            return s, [value]
    return None, []


def _apply_rope(model: ModelFacts, ver, out: DerivedLen) -> None:
    model_type = str(model.text.get("model_type") or model.data.get("model_type") or "")
    if "gemma3" in model_type and ver >= V(fw.GEMMA3_EXEMPT):
        return
    setting, sets = _rope_sets(model, ver)
    if not sets:
        return
    exempt = _EXEMPT_FROM_0_30 if ver >= V(fw.YARN_EXEMPT) else _EXEMPT
    factor = 1.0
    scaled = ver >= V(fw.ROPE_PARAMETERS)  # from 0.12 the (float) factor is applied even when it stays 1.0
    for rp in sets:
        rope_type = rp.get("rope_type") or rp.get("type") or "default"
        if rope_type in exempt:
            out.steps.append(f"{setting.key} rope_type {rope_type}: not scaled by vLLM {ver} ({setting.prov})")
            continue
        scaled = True
        factor = rp.get("factor", factor)
        if rope_type == "yarn" and "original_max_position_embeddings" in rp:
            out.value = rp["original_max_position_embeddings"]
            out.steps.append(f"yarn: starts from original_max_position_embeddings = {out.value} ({setting.prov})")
    factor = 1.0 if factor is None else factor
    if scaled:
        out.value = out.value * factor
        if factor != 1.0:
            out.steps.append(f"{setting.key} factor {factor} multiplies it → {out.value} ({setting.prov})")


def allow_long_max_model_len(env: dict[str, Setting]) -> Setting | None:
    """The ``VLLM_ALLOW_LONG_MAX_MODEL_LEN`` setting if it is on (vllm/envs.py: "1" or "true")."""
    s = env.get(fw.ENV_ALLOW_LONG_MAX_MODEL_LEN)
    if s is not None and not s.templated and str(s.value).strip().lower() in ("1", "true"):
        return s
    return None
