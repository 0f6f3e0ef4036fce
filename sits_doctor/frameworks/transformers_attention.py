"""What transformers does with the attention a model config asks for: which implementation runs,
when asking fails, and what the causal mask costs. Read by SITS003 and SITS101.

Every cut-off is the first release with the behaviour; each was read in the release's own source
(the wheel from PyPI) and, for 5.24.0, reproduced by loading a config with the installed package.
"""

from __future__ import annotations

# Keys of config.json that ask for an implementation: `attn_implementation` is popped by
# PreTrainedConfig.__init__; `_attn_implementation` goes through its property setter
# (configuration_utils.py@v5.24.0). Both reach from_pretrained / from_config.
from sits_doctor.frameworks.transformers import ATTN_KEYS, DTYPE_KEYS  # noqa: F401  (one home: transformers.py)

EAGER = "eager"
SDPA = "sdpa"
FLASH_2 = "flash_attention_2"

OUTPUT_ATTENTIONS_KEY = "output_attentions"
# Releases the research tables cover (shared facts start at 4.45: _autoset_attn_implementation).
FIRST_KNOWN = "4.45.0"
# SDPA with output_attentions=True: 4.45-4.52 fall back to eager attention on every call (with a
# warning, attentions returned); from 4.53 the SDPA path only warns and returns no attentions
# (integrations/sdpa_attention.py@v4.53.0; reproduced on 5.24.0: outputs.attentions == ()).
SDPA_NO_ATTENTIONS = "4.53.0"
# PreTrainedConfig.validate_output_attentions: a config asking for a non-eager implementation and
# output_attentions fails to load (configuration_utils.py@v5.4.0; absent in v5.3.0; reproduced on
# 5.24.0 as StrictDataclassClassValidationError).
OUTPUT_ATTENTIONS_VALIDATED = "5.4.0"
OUTPUT_ATTENTIONS_ERROR = ("The `output_attentions` attribute is not supported when using the `attn_implementation` "
                           "set to {impl}. Please set it to 'eager' instead.")

# flash_attention_2 without the flash_attn package: ImportError at load, except that from 4.56 a
# Hub kernel (kernels-community/flash-attn2) is fetched instead when the `kernels` package is
# installed (modeling_utils.py _check_and_adjust_attn_implementation@v4.56.0 / v5.24.0).
FLASH_PACKAGE = "flash_attn"
KERNELS_PACKAGE = "kernels"
FLASH_HUB_FALLBACK = "4.56.0"
FLASH_HUB_KERNEL = "kernels-community/flash-attn2"
FLASH_IMPORT_ERROR = ("FlashAttention2 has been toggled on, but it cannot be used due to the following error: the "
                      "package for FlashAttention2 doesn't seem to be installed.")
# flash-attn's kernels run on Ampere (sm80) and newer: csrc/flash_attn/flash_api.cpp raises
# "FlashAttention only supports Ampere GPUs or newer." at the first forward; transformers does no
# compute-capability check for FA2 itself.
FLASH_MIN_CC = (8, 0)
FLASH_CC_ERROR = "FlashAttention only supports Ampere GPUs or newer."

# from_pretrained's default dtype became "auto" (the config's dtype) in 5.0.0 (modeling_utils.py:
# `if dtype is None: dtype = "auto"`@v5.0.0; 4.57.1 loads torch's default float32).
DTYPE_AUTO_DEFAULT = "5.0.0"
FLOAT32 = ("float32", "fp32")
# torch's flash and cuDNN SDPA kernels take float16/bfloat16 only; float32 goes to the
# memory-efficient kernel or math (aten/src/ATen/native/transformers/cuda/sdp_utils.cpp
# check_tensor_dtype for each backend). bfloat16 needs Ampere (sm80) or newer.
BF16_MIN_CC = (8, 0)

# GenerationConfig.prefill_chunk_size: generate() runs the prompt through the model in chunks
# (generation/configuration_utils.py@v4.51.0; absent in v4.50.0).
PREFILL_CHUNK_KEY = "generation_config.prefill_chunk_size"
PREFILL_CHUNK_FIRST = "4.51.0"

# Logit soft-capping (Gemma 2, ...): SDPA cannot apply it; integrations/sdpa_attention.py@v5.24.0
# raises ValueError("`sdpa` attention does not support `softcap`...") when a model passes one, so
# eager (or flex / flash-attn) is the right choice for such a model, not a waste.
SOFTCAP_KEY = "attn_logit_softcapping"

# PreTrainedModel.set_attn_implementation switches a loaded model (modeling_utils.py@v4.54.0).
SET_ATTN_IMPLEMENTATION = "4.54.0"


def asked(settings):
    """The config.json setting that asks for an attention implementation (either spelling), or None."""
    return next((settings[k] for k in ATTN_KEYS if k in settings and isinstance(settings[k].value, str)), None)
