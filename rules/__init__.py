"""The rule registry: an explicit, sorted table (no registration as a side effect of import).

A test checks that every ``sitsNNN_*.py`` module in this folder is listed here.
"""

from sits_doctor.rules import (
    sits001_unbounded_kv_cache,
    sits003_materialized_causal_mask,
    sits004_rope_recomputed_per_layer,
    sits005_static_activation_scales,
    sits007_full_precision_kv_at_long_context,
    sits101_silent_attention_downgrade,
    sits201_value_rejected_by_parser,
    sits202_max_model_len_exceeds_model,
    sits204_removed_or_renamed_option,
    sits205_yaml_false_dropped,
    sits206_quantization_not_read,
    sits900_unused_suppression,
)

RULES = (
    sits001_unbounded_kv_cache,
    sits003_materialized_causal_mask,
    sits004_rope_recomputed_per_layer,
    sits005_static_activation_scales,
    sits007_full_precision_kv_at_long_context,
    sits101_silent_attention_downgrade,
    sits201_value_rejected_by_parser,
    sits202_max_model_len_exceeds_model,
    sits204_removed_or_renamed_option,
    sits205_yaml_false_dropped,
    sits206_quantization_not_read,
    sits900_unused_suppression,
)

BY_CODE = {m.RULE.code: m for m in RULES}
