"""What the installed transformers runs for each causal-LM architecture, found by building it.

For every model type in transformers' ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`` it builds the model
from the type's default config (``AutoConfig.for_model``, at most 4 decoder layers) on PyTorch's
meta device (no weights, no network, no remote code) and records:

- ``attention``: ``config._attn_implementation`` after ``from_config`` chose it with nothing
  requested (``sdpa`` where the class supports it, else ``eager``);
- ``supports_sdpa``: the class's ``_supports_sdpa``;
- ``rope``: where rotary embeddings are computed: ``model`` (one module for the whole model,
  cos/sin built once per forward and passed to every layer), ``attention`` (a rotary module inside
  a decoder layer: built again in every layer), or ``none`` (no rotary module: absolute or ALiBi
  positions, or RoPE computed without a module);
- ``rotary_modules``: the module paths found (``*`` for the index of a decoder layer).

    python tools/gen_hf_runtime.py [--out sits_doctor/frameworks/data/hf_runtime.json]

The output names the transformers and torch versions it ran with. A type whose default config
cannot be built is listed under ``failed`` with the error.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import warnings
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "sits_doctor" / "frameworks" / "data" / "hf_runtime.json"
MAX_LAYERS = 4


def rope_placement(paths: list[str], layer_prefixes: list[str]) -> str:
    """``model``, ``attention`` or ``none`` from the paths of a model's rotary modules and the
    path prefixes of its decoder layers (``model.layers.3.``)."""
    if not paths:
        return "none"
    return "attention" if any(p.startswith(tuple(layer_prefixes)) for p in paths) else "model"


def shrink(config) -> None:
    """At most MAX_LAYERS decoder layers (lists with one entry per layer cut to match)."""
    for cfg in {id(config): config, id(config.get_text_config()): config.get_text_config()}.values():
        n = getattr(cfg, "num_hidden_layers", None)
        if not isinstance(n, int) or n <= MAX_LAYERS:
            continue
        for name, value in list(vars(cfg).items()):
            if isinstance(value, list) and len(value) == n:
                setattr(cfg, name, value[:MAX_LAYERS])
        cfg.num_hidden_layers = MAX_LAYERS


def build(config, auto_class):
    import torch

    with torch.device("meta"):
        return auto_class.from_config(config)


def describe(model, n_layers: int) -> dict:
    from torch import nn

    modules = dict(model.named_modules())
    # the decoder layers: the children of a ModuleList with one entry per hidden layer
    layer_prefixes = [f"{name}.{i}." for name, mod in modules.items()
                      if isinstance(mod, nn.ModuleList) and len(mod) == n_layers for i in range(n_layers)]
    rotary = [name for name, mod in modules.items() if "rotary" in type(mod).__name__.lower()]
    shown = sorted({next((pre.rsplit(".", 2)[0] + ".*." + p[len(pre):] for pre in layer_prefixes if p.startswith(pre)), p)
                    for p in rotary})
    return {
        "attention": model.config._attn_implementation,
        "supports_sdpa": bool(getattr(model, "_supports_sdpa", False)),
        "rope": rope_placement(rotary, layer_prefixes),
        "rotary_modules": shown,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    import torch
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    transformers.logging.set_verbosity_error()
    models, failed = {}, {}
    for model_type in sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES):
        try:
            config = AutoConfig.for_model(model_type)
            shrink(config)
            models[model_type] = describe(build(config, AutoModelForCausalLM),
                                          config.get_text_config().num_hidden_layers)
        except Exception as exc:  # a default config that does not build: recorded, not guessed
            failed[model_type] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
        print(model_type, models.get(model_type) or failed[model_type], file=sys.stderr)
    data = {
        "generator": "tools/gen_hf_runtime.py",
        "transformers": transformers.__version__,
        "torch": torch.__version__.split("+")[0],
        "models": models,
        "failed": failed,
    }
    args.out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
