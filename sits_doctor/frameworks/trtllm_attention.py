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
REBUILD = "trtllm-build --context_fmha enable"
