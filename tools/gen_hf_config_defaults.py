"""Write sits_doctor/frameworks/data/hf_config_defaults.json: the values transformers' config
classes give the shape keys a config.json leaves out, per ``model_type``.

A published config.json does not always state every dimension: google/gemma-3-27b-it's
``text_config`` has no ``vocab_size`` and no ``max_position_embeddings``, and transformers (and
vLLM, which loads configs through it) fill them from ``Gemma3TextConfig``'s defaults. sits-doctor
reads configs without importing transformers, so this tool asks the installed transformers once:

    .venv/bin/python tools/gen_hf_config_defaults.py

For each ``model_type`` in ``transformers.CONFIG_MAPPING`` it builds the config class with no
arguments (composite models: their text config too) and keeps the shape keys. A default that
``__init__`` computes from other arguments (``num_key_value_heads`` defaulting to
``num_attention_heads``, ``head_dim`` to ``hidden_size // num_attention_heads``) is not a constant:
the class is built a second time with those arguments changed, and any key whose value moves
with them is left out. Only plain numbers and booleans are kept.
"""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "sits_doctor" / "frameworks" / "data" / "hf_config_defaults.json"
KEYS = (
    "num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim",
    "intermediate_size", "vocab_size", "max_position_embeddings", "sliding_window", "num_local_experts",
    "num_experts", "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size",
    "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "first_k_dense_replace",
    "n_routed_experts", "n_shared_experts", "tie_word_embeddings", "rope_theta", "sliding_window_pattern",
)
# the arguments other defaults are computed from, and a second value for each
MOVED = {"hidden_size": 3 * 1024, "num_attention_heads": 16, "num_hidden_layers": 7,
         "intermediate_size": 9 * 1024, "vocab_size": 77_777}


def constants(cls) -> dict:
    plain = cls()
    try:
        moved = cls(**{k: v for k, v in MOVED.items() if hasattr(plain, k)})
    except Exception:  # noqa: BLE001 - a class that refuses the changed arguments: keep only what is not derived-looking
        moved = None
    out = {}
    for key in KEYS:
        try:
            if not hasattr(plain, key):
                continue
            value = getattr(plain, key)
        except Exception:  # noqa: BLE001 - per-layer (heterogeneous) attributes refuse a global read
            continue
        if isinstance(value, bool) or (isinstance(value, (int, float)) and value == value):
            if key in MOVED:
                if moved is None or _get(moved, key) != MOVED[key]:
                    continue  # the class does not take this argument as given
                out[key] = value
            elif moved is not None and _get(moved, key) == value:
                out[key] = value
    pattern = _layer_pattern(plain, moved)
    if pattern:
        out["layer_types_pattern"] = pattern
    return out


def _layer_pattern(plain, moved) -> list[str] | None:
    """The repeating unit of the default ``layer_types`` (Gemma 3: five sliding layers, then one
    full), when the class builds the list by repeating it for any number of layers."""
    types = _get(plain, "layer_types")
    if not isinstance(types, list) or not types or not all(isinstance(t, str) for t in types):
        return None
    for period in range(1, len(types) + 1):
        unit = types[:period]
        if all(t == unit[i % period] for i, t in enumerate(types)):
            break
    if len(set(unit)) < 2:
        return None  # every layer alike: nothing to derive
    other = _get(moved, "layer_types") if moved is not None else None
    if not isinstance(other, list) or other != [unit[i % period] for i in range(len(other))]:
        return None
    return unit


def _get(config, key):
    try:
        return getattr(config, key, None)
    except Exception:  # noqa: BLE001
        return None


def main() -> None:
    import transformers
    from transformers import CONFIG_MAPPING

    logging.disable(logging.CRITICAL)
    warnings.simplefilter("ignore")
    models, text_types = {}, {}
    for model_type in sorted(CONFIG_MAPPING.keys()):
        try:
            config = CONFIG_MAPPING[model_type]()
        except Exception:  # noqa: BLE001 - a few classes need arguments
            continue
        found = constants(type(config))
        if found:
            models[model_type] = found
        try:
            text = config.get_text_config()
        except Exception:  # noqa: BLE001
            text = config
        if text is not config and getattr(text, "model_type", None):
            text_types[model_type] = text.model_type
            if text.model_type not in models:
                found = constants(type(text))
                if found:
                    models[text.model_type] = found
    data = {"_source": f"transformers {transformers.__version__} config classes (CONFIG_MAPPING), "
                       "written by tools/gen_hf_config_defaults.py",
            "transformers": transformers.__version__, "text_types": text_types, "models": models}
    OUT.write_text(json.dumps(data, indent=0, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{OUT}: {len(models)} model types, {len(text_types)} composite")


if __name__ == "__main__":
    main()
