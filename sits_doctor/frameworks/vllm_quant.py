"""What vLLM does with the quantization a checkpoint declares (SITS206 and the memory rules read
it here): where it looks, and which layouts it normalises, release by release.

vLLM normalises config.json's ``quantization_config``
(vllm/transformers_utils/model_arch_config_convertor.py@v0.33.0 ``_normalize_quantization_config``;
vllm/config/__init__.py@v0.10.2 ``_parse_quant_hf_config``): ``producer.name`` "modelopt" with
``quantization.quant_algo`` FP8 / FP8_PER_CHANNEL_PER_TOKEN / FP8_PB_WO → "modelopt", NVFP4 →
"modelopt_fp4", MIXED_PRECISION → "modelopt_mixed"; any other quant_algo raises ``ValueError:
Unknown ModelOpt quant algo``. A flat ``quant_algo`` without ``quant_method`` stays "" (unquantized:
``ModelConfig._verify_quantization``, vllm/config/model.py@v0.33.0). It reads
``hf_quant_config.json`` when config.json has none (vllm/transformers_utils/config.py
``get_config``) from READS_HF_QUANT_CONFIG; before, only with ``--quantization modelopt``
(``ModelOptFp8Config.get_config_filenames``, quantization/modelopt.py@v0.8.5). It reads
``quantize_config.json`` only when ``--quantization`` names a GPTQ method
(``AutoGPTQConfig.get_config_filenames``, quantization/auto_gptq.py@v0.33.0; gptq.py@v0.8.5).
Checked in the released wheels 0.6.6.post1, 0.8.5, 0.9.0, 0.9.2, 0.10.0, 0.10.1, 0.10.2, 0.33.0.
"""

from __future__ import annotations

from sits_doctor.frameworks import transformers as tf
from sits_doctor.versions import V

MODELOPT_PRODUCER = "modelopt"
MODELOPT_ALGOS = {"FP8": "modelopt", "FP8_PER_CHANNEL_PER_TOKEN": "modelopt", "FP8_PB_WO": "modelopt",
                  "NVFP4": "modelopt_fp4", "MIXED_PRECISION": "modelopt_mixed"}
READS_HF_QUANT_CONFIG = "0.10.1"  # first release that reads it on its own (absent in 0.10.0)
QUANTIZATION = "quantization"  # the --quantization option: a method named there makes vLLM look for its own file


def reads_checkpoint_quant(found, version: str | None, asked: bool) -> tuple[bool, str]:
    """Whether vLLM ``version`` (None: the newest the rules know) reads a checkpoint's
    quantization (``found``: ModelDims.checkpoint_quant) as written, and if not, what it does
    instead; ``asked``: the deployment names a ``--quantization`` method."""
    quant = found.value
    if asked:
        return True, ""
    reads_sidecar = version is None or V(version) >= V(READS_HF_QUANT_CONFIG)
    if quant.where == tf.AUTOGPTQ_CONFIG:
        return False, ("reads it only with a GPTQ --quantization; without it the "
                       "model is built unquantized and the checkpoint's qweight / qzeros / scales tensors have "
                       "nothing to load into")
    if quant.where == tf.HF_QUANT_CONFIG:
        if reads_sidecar:
            return True, ""
        return False, (f"reads it only with --quantization modelopt (on its own from "
                       f"{READS_HF_QUANT_CONFIG}); without it the model is built unquantized")
    if quant.declared:
        return True, ""
    config = found.setting.value if found.setting is not None else None
    section = config.get(tf.HF_QUANT_SECTION) if isinstance(config, dict) else None
    producer = config.get("producer") if isinstance(config, dict) else None
    algo = section.get(tf.QUANT_ALGO_KEY) if isinstance(section, dict) else None
    if reads_sidecar and isinstance(producer, dict) and producer.get("name") == MODELOPT_PRODUCER and isinstance(algo, str):
        if algo.upper() in MODELOPT_ALGOS:
            return True, ""
        return False, f"refuses it at startup: ValueError: Unknown ModelOpt quant algo: {algo}"
    return False, ("takes a quantization_config without quant_method for an unquantized model (its ModelOpt "
                   "reader needs producer.name modelopt with quantization.quant_algo)")
