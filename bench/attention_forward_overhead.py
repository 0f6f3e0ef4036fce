"""Host time causal_trim's attention hook adds to one decode call it sends to sdpa (CPU only).

    python bench/attention_forward_overhead.py

A tiny Llama (fixtures/hf/tiny-random-llama), one decode-shaped call (q [8, 4, 1, 16] over 40
keys), with the device check answered as on CUDA: transformers' ``sdpa_attention_forward`` alone
(with the padding mask, and without a mask), then ``causal_trim.attention_forward`` given a step
the mask function routed to sdpa with a padding mask (a padded decode step), routed with no mask
left (sdpa_mask skipped it), no mask at all (an unpadded step, every batch-1 step; the table sends
it to sdpa), and, for comparison, the same no-mask call through every check. Each hooked case is
set against transformers' call with the same mask. Samples of 20,000 calls, the cases taking turns
5 times, best per case, in µs. Needs transformers; runs on the CPU (the call's tensors are tiny:
this measures Python, not math).
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


def best_us(fn, repeat: int = 5) -> float:
    for _ in range(500):
        fn()
    best = float("inf")
    for _ in range(repeat):
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
    mask = torch.ones(8, 1, 1, 40, dtype=torch.bool)
    mask[::2, ..., :7] = False  # left padding in every other row

    def routed(m):
        return causal_trim.PaddedCausal(None, None, (8, 1, 1, 40), lambda: m, routed=True)

    def hook(m):
        return lambda: causal_trim.attention_forward(attn, q, k, v, m, scaling=0.25)

    cases = {  # name: (call, the device check's answer)
        "sdpa, mask": (lambda: sdpa_attention_forward(attn, q, k, v, mask, scaling=0.25), True),
        "sdpa, no mask": (lambda: sdpa_attention_forward(attn, q, k, v, None, scaling=0.25), True),
        "routed, mask": (hook(routed(mask)), True),
        "routed, mask skipped": (hook(routed(None)), True),
        "no mask": (hook(None), True),
        "no mask, every check": (hook(None), False),  # the fast path off: _unfit, then route
    }
    table = causal_trim._table()
    real = causal_trim._on_cuda, causal_trim.route
    best = dict.fromkeys(cases, float("inf"))
    try:
        causal_trim.set_table({("decode", False): [(8, 40, "sdpa")]})
        causal_trim.route = lambda module, query, key, padded: "sdpa"  # the checks' answer on CUDA
        with torch.no_grad():
            for _ in range(5):
                for name, (fn, fast) in cases.items():
                    causal_trim._on_cuda = lambda t, fast=fast: fast and t is not None
                    best[name] = min(best[name], best_us(fn, repeat=1))
    finally:
        causal_trim._on_cuda, causal_trim.route = real
        causal_trim.set_table(table)
    base = {"routed, mask": "sdpa, mask"}
    print(f"sdpa_attention_forward: {best['sdpa, mask']:.2f} us with the mask, {best['sdpa, no mask']:.2f} us without")
    for name in ("routed, mask", "routed, mask skipped", "no mask", "no mask, every check"):
        print(f"causal_trim, {name}: {best[name] - best[base.get(name, 'sdpa, no mask')]:+.2f} us per call")


if __name__ == "__main__":
    main()
