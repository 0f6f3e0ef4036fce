"""What a ``trtllm-build`` command line sets: each flag the rules read, and the key of the engine
``config.json`` it becomes (``build_config.*``, ``build_config.plugin_config.*``), so a build
command feeds the same facts as the engine it writes.

Sources (argparse, read in full): NVIDIA/TensorRT-LLM ``tensorrt_llm/commands/build.py``@008b2b8
``parse_arguments`` (``--max_seq_len``/``--max_decoder_seq_len``, ``--kv_cache_type``
``continuous|paged|disabled`` with ``--paged_kv_cache`` "Deprecated. Enabling this option is
equvilient to ``--kv_cache_type paged``"), and ``tensorrt_llm/plugin/plugin.py``
``add_plugin_argument`` in three snapshots (``cli_plugin_args``): a ``bool`` plugin field is a
flag taking ``enable``/``disable``, a dtype plugin (``--gpt_attention_plugin``) takes a dtype,
``auto`` or ``disable``, ``--tokens_per_block`` an int. The oldest snapshot's list still has
``paged_kv_cache``/``multi_block_mode``/``enable_xqa``/``use_custom_all_reduce``; the later ones
do not. Which release each snapshot is was not established, so a flag none of them has is
reported as not checked, never as a startup failure.
"""

from __future__ import annotations

from typing import NamedTuple

COMMAND = "trtllm-build"
MODULE = "tensorrt_llm.commands.build"  # python -m: the same parser
SOURCE = "NVIDIA/TensorRT-LLM tensorrt_llm/commands/build.py@008b2b8 and tensorrt_llm/plugin/plugin.py"
KIND = "trtllm-engine"  # a build command is judged as the engine it writes


class BuildFlag(NamedTuple):
    key: str  # the engine config.json key (dotted) it sets
    type: str  # "int" | "switch" (enable/disable) | "str" | "upper" (an enum name, written upper case)


_PLUGINS = "build_config.plugin_config."
FLAGS: dict[str, BuildFlag] = {
    "--max_batch_size": BuildFlag("build_config.max_batch_size", "int"),
    "--max_input_len": BuildFlag("build_config.max_input_len", "int"),
    "--max_seq_len": BuildFlag("build_config.max_seq_len", "int"),
    "--max_decoder_seq_len": BuildFlag("build_config.max_seq_len", "int"),
    "--max_num_tokens": BuildFlag("build_config.max_num_tokens", "int"),
    "--opt_num_tokens": BuildFlag("build_config.opt_num_tokens", "int"),
    "--max_beam_width": BuildFlag("build_config.max_beam_width", "int"),
    "--kv_cache_type": BuildFlag("build_config.kv_cache_type", "upper"),
    "--paged_kv_cache": BuildFlag(_PLUGINS + "paged_kv_cache", "switch"),
    "--remove_input_padding": BuildFlag(_PLUGINS + "remove_input_padding", "switch"),
    "--context_fmha": BuildFlag(_PLUGINS + "context_fmha", "switch"),
    "--use_paged_context_fmha": BuildFlag(_PLUGINS + "use_paged_context_fmha", "switch"),
    "--use_fp8_context_fmha": BuildFlag(_PLUGINS + "use_fp8_context_fmha", "switch"),
    "--multiple_profiles": BuildFlag(_PLUGINS + "multiple_profiles", "switch"),
    "--tokens_per_block": BuildFlag(_PLUGINS + "tokens_per_block", "int"),
    "--gpt_attention_plugin": BuildFlag(_PLUGINS + "gpt_attention_plugin", "str"),
    "--gemm_plugin": BuildFlag(_PLUGINS + "gemm_plugin", "str"),
}
SWITCH = {"enable": True, "disable": False}
# flags of build.py@008b2b8 (and of the plugin snapshots) whose values no rule reads: kept under
# their own name, never reported
OTHER_FLAGS = frozenset(
    """
    --checkpoint_dir --model_config --build_config --model_cls_file --model_cls_name --output_dir
    --max_encoder_input_len --max_prompt_embedding_table_size --max_multimodal_len --input_timing_cache
    --output_timing_cache --profiling_verbosity --strip_plan --weight_sparsity --weight_streaming --fast_build
    --workers --log_level --enable_debug_output --visualize_network --dry_run --monitor_memory --logits_dtype
    --gather_context_logits --gather_generation_logits --gather_all_token_logits --lora_dir --lora_ckpt_source
    --lora_target_modules --max_lora_rank --speculative_decoding_mode --max_draft_len --auto_parallel
    --gpus_per_node --cluster_key --bert_attention_plugin --gemm_swiglu_plugin --fp8_rowwise_gemm_plugin
    --lora_plugin --dora_plugin --moe_plugin --mamba_conv1d_plugin --nccl_plugin --low_latency_gemm_plugin
    --low_latency_gemm_swiglu_plugin --gemm_allreduce_plugin --bert_context_fmha_fp32_acc --fuse_fp4_quant
    --paged_state --streamingllm --norm_quant_fusion --reduce_fusion --user_buffer --use_fused_mlp
    --pp_reduce_scatter --lookup_plugin --context_fmha_fp32_acc --use_custom_all_reduce --multi_block_mode
    --enable_xqa
    """.split()
)
# argparse flags that take no value (action="store_true")
STORE_TRUE = frozenset(
    """
    --strip_plan --weight_sparsity --weight_streaming --fast_build --enable_debug_output --dry_run
    --monitor_memory --gather_context_logits --gather_generation_logits --gather_all_token_logits
    """.split()
)


def convert(flag: BuildFlag, text: str):
    """The value the engine config.json would hold for ``text``, or the text unchanged when the
    parser would refuse it."""
    if flag.type == "int":
        try:
            return int(text)
        except ValueError:
            return text
    if flag.type == "switch":
        return SWITCH.get(text, text)
    if flag.type == "upper":
        return text.upper()
    return text
