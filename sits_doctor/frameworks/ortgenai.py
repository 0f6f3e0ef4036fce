"""What ONNX Runtime GenAI reads from ``genai_config.json``, as effective facts.

The strict parser's schema is sits_doctor/schemas/ortgenai.py. Defaults from ``src/config.h``
(microsoft/onnxruntime-genai): ``search.max_length`` 0 means ``model.context_length``,
``batch_size`` 1, ``past_present_share_buffer`` false; CUDA graphs only with the provider option
``enable_cuda_graph: "1"``.
"""

from __future__ import annotations



def _newest() -> str:
    from sits_doctor.frameworks.ortgenai_releases import releases

    return releases()[-1]  # the newest wheel whose parser the tables hold


def __getattr__(name: str):
    """``NEWEST``: the newest release this module's knowledge covers, read off its data when first
    asked (not at import: every run imports this module, few need it)."""
    if name == "NEWEST":
        return _newest()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

CONFIG_H = "src/config.h"
MAX_LENGTH = "search.max_length"
SHARE_BUFFER = "search.past_present_share_buffer"  # the KV buffer is allocated whole, for max_length
PROVIDER_OPTIONS = ("model", "decoder", "session_options", "provider_options")  # the decoder's device


def effective(plan, target, model_dims=None):
    """The :class:`~sits_doctor.facts.Serving` of a genai_config.json, typed by
    :func:`sits_doctor.facts.validated` (SITS201 reports the values its schema rejects)."""
    from sits_doctor.facts import Serving, Value, validated

    def default(value, note=CONFIG_H):
        return Value.default(value, f"default of ORT GenAI {target.version} ({note})")

    def val(key, fallback=None):
        s = plan.settings.get(key)
        return Value.of(s) if s is not None and not s.templated else fallback

    context = val("model.context_length")
    max_len = val(MAX_LENGTH)
    if (max_len is None or max_len.value == 0) and context is not None:
        max_len = Value.derived(context.value, f"search.max_length unset: model.context_length ({context.prov})")
    graphs = None
    for key, s in plan.settings.items():
        if key.endswith(".enable_cuda_graph") and ".provider_options." in key:
            graphs = Value(s.value == "1", s.prov, s)
    return validated(Serving(
        max_model_len=max_len,
        max_num_seqs=val("search.batch_size", default(1)),
        cuda_graphs=graphs or default(False, "CUDA graphs need the provider option enable_cuda_graph \"1\""),
        memory_fraction=val("engine.dynamic_batching.gpu_utilization_factor"),
        block_size=val("engine.dynamic_batching.block_size"),
        kv_cache_dtype=None,
        prefix_caching=None,
    ))
