"""TensorRT-LLM engine attention settings read by SITS003.

``plugin_config.context_fmha`` (default true in every release: ``tensorrt_llm/plugin/plugin.py``)
selects the fused context-phase attention kernel. Disabled, the GPT attention plugin "maps to a
sequence of GPU kernels that will store the intermediate Q*K^T tensor in memory before calling the
softmax operator" (docs/source/advanced/gpt-attention.md, "Context Phase"). ``PluginConfig``
accepts booleans and the strings "enable" / "disable".
"""

from __future__ import annotations

CONTEXT_FMHA = "build_config.plugin_config.context_fmha"  # an engine config.json (0.8 and later)
OFF = (False, "disable")
# Before 0.8 the engine config.json kept ``plugin_config.context_fmha_type``, a ContextFMHAType:
# disabled = 0, enabled = 1, enabled_with_fp32_acc = 2 (tensorrt_llm/plugin/plugin.py at v0.7.1).
LEGACY_CONTEXT_FMHA = "plugin_config.context_fmha_type"
LEGACY_OFF = 0
# The per-model build scripts of those releases left it off unless asked (examples/<model>/build.py
# `--enable_context_fmha`, default False).
LEGACY_REBUILD = "examples/<model>/build.py --enable_context_fmha (trtllm-build --context_fmha enable from 0.8)"
REBUILD = "trtllm-build --context_fmha enable"
