"""Host time causal_trim's attention hook adds to one decode call it routes to sdpa (CPU only).

    python bench/attention_forward_overhead.py

A tiny Llama (fixtures/hf/tiny-random-llama), one decode-shaped call (q [8, 4, 1, 16] over 40
keys): transformers' ``sdpa_attention_forward`` alone, then ``causal_trim.attention_forward`` given
a mask the mask function already routed to sdpa (a padded decode step), then given no mask (an
unpadded step, every batch-1 step; the table sends it to sdpa, the device check is answered as on
CUDA, and, for comparison, the same call through the full checks). 20,000 calls per sample, best of 5, in µs.
Needs transformers; runs on the CPU (the call's tensors are tiny: this measures Python, not math).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402
from transformers.integrations.sdpa_attention import sdpa_attention_forward  # noqa: E402

from sits_doctor.fixes.kernel_patches import causal_trim  # noqa: E402

N = 20000


def best_us(fn) -> float:
    for _ in range(500):
        fn()
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(N):
            fn()
        best = min(best, (time.perf_counter() - t) / N * 1e6)
    return best


def main() -> None:
    torch.manual_seed(0)
    cfg = json.loads((REPO / "fixtures" / "hf" / "tiny-random-llama" / "config.json").read_text())
    attn = LlamaForCausalLM(LlamaConfig(**cfg)).eval().model.layers[0].self_attn
    attn.__dict__[causal_trim._POLICY_ATTR] = "table"
    q = torch.randn(8, 4, 1, 16)
    k, v = torch.randn(8, 2, 40, 16), torch.randn(8, 2, 40, 16)
    routed = causal_trim.PaddedCausal(None, None, (8, 1, 1, 40), lambda: None, routed=True)
    with torch.no_grad():
        plain = best_us(lambda: sdpa_attention_forward(attn, q, k, v, None, scaling=0.25))
        hooked = best_us(lambda: causal_trim.attention_forward(attn, q, k, v, routed, scaling=0.25))
        table = causal_trim._table()
        causal_trim.set_table({("decode", False): [(8, 40, "sdpa")]})
        real_device, real_route = causal_trim._fast_device, causal_trim.route
        try:
            causal_trim._fast_device = lambda t: True
            unpadded = best_us(lambda: causal_trim.attention_forward(attn, q, k, v, None, scaling=0.25))
            causal_trim._fast_device = lambda t: False  # the full checks, routed to sdpa like on CUDA
            causal_trim.route = lambda module, query, key, padded: "sdpa"
            checked = best_us(lambda: causal_trim.attention_forward(attn, q, k, v, None, scaling=0.25))
        finally:
            causal_trim._fast_device, causal_trim.route = real_device, real_route
            causal_trim.set_table(table)
    print(f"sdpa_attention_forward {plain:.2f} us; added per call by causal_trim: routed mask "
          f"{hooked - plain:.2f} us, no mask {unpadded - plain:.2f} us (through every check: {checked - plain:.2f} us)")


if __name__ == "__main__":
    main()
