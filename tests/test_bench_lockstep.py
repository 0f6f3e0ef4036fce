"""bench/e2e_patches.py's lockstep timing: two generate() calls taking turns token by token.

The generate columns of the end-to-end results are computed from these turns, so the hand-over
has to alternate strictly, time only a model's own work, and never hang when one side fails."""

from __future__ import annotations

import copy
import json
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")


def _load_bench():
    """bench/e2e_patches.py as a module, leaving sys.path as it was (the script puts the repository
    root first, where ``kernels`` is the source folder, not sits_doctor.kernels)."""
    import importlib.util

    saved = list(sys.path)
    try:
        spec = importlib.util.spec_from_file_location("e2e_patches_under_test", REPO / "bench" / "e2e_patches.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path[:] = saved


bench = _load_bench()
SWITCHES = [pytest.param("thread"), pytest.param("greenlet", marks=pytest.mark.skipif(
    bench._greenlet() is None, reason="greenlet is not installed"))]


def fake_generate(log, name, tokens, work_s=0.0):
    """What generate() does with a streamer: put(prompt), then put(token) after each step."""
    def fn(streamer=None):
        streamer.put(f"{name} prompt")
        for i in range(tokens):
            log.append((name, i, threading.get_ident()))
            time.sleep(work_s)
            streamer.put(f"{name} {i}")
        streamer.end()
    return fn


@pytest.mark.parametrize("switch", SWITCHES)
@pytest.mark.parametrize("first", [0, 1])
def test_turns_alternate_strictly_and_first_goes_first(first, switch):
    log = []
    pair = bench._Lockstep((fake_generate(log, "a", 5), fake_generate(log, "b", 5)), first=first, switch=switch)
    assert pair.switch == switch
    names = [n for n, _, _ in log]
    lead, other = ("a", "b") if first == 0 else ("b", "a")
    assert names == [lead, other] * 5
    assert [i for _, i, _ in log] == [i for i in range(5) for _ in (0, 1)]
    threads = {t for _, _, t in log}
    # threads: one per model; greenlets: both in the caller's thread
    assert threads == ({threading.get_ident()} if switch == "greenlet" else threads - {threading.get_ident()})
    assert len(threads) == (1 if switch == "greenlet" else 2)
    assert [len(t) for t in pair.turns] == [5, 5]


@pytest.mark.parametrize("switch", SWITCHES)
def test_uneven_calls_both_run_to_the_end(switch):
    log = []
    pair = bench._Lockstep((fake_generate(log, "a", 2), fake_generate(log, "b", 5)), first=0, switch=switch)
    assert [n for n, _, _ in log] == ["a", "b", "a", "b", "b", "b", "b"]
    assert [len(t) for t in pair.turns] == [2, 5]


@pytest.mark.parametrize("switch", SWITCHES)
def test_a_turn_times_only_its_own_work(switch):
    log = []
    pair = bench._Lockstep((fake_generate(log, "a", 4, work_s=0.02), fake_generate(log, "b", 4, work_s=0.0)),
                           first=0, switch=switch)
    slow, fast = pair.turns
    assert min(slow) >= 0.02  # the sleep is inside a's turns
    assert max(fast) < 0.015  # and none of it in b's, which ran between them
    assert [len(t) for t in pair.turns_cpu] == [4, 4]
    assert max(pair.turns_cpu[0]) < 0.015  # a slept: wall time, not CPU time


@pytest.mark.parametrize("switch", SWITCHES)
@pytest.mark.parametrize("broken", [0, 1])
@pytest.mark.parametrize("first", [0, 1])
def test_a_failing_side_raises_and_the_other_is_not_left_waiting(broken, first, switch):
    def boom(streamer=None):
        streamer.put("prompt")
        raise ValueError("boom")

    fns = [fake_generate([], "ok", 6), fake_generate([], "ok", 6)]
    fns[broken] = boom
    t = time.perf_counter()
    grad = torch.is_grad_enabled()
    with pytest.raises(ValueError, match="boom"):
        bench._Lockstep(tuple(fns), first=first, switch=switch)
    assert time.perf_counter() - t < 30  # far under the 300 s hand-over timeout
    assert torch.is_grad_enabled() == grad


@pytest.mark.parametrize("switch", SWITCHES)
def test_timed_lockstep_on_tiny_llama(monkeypatch, switch):
    """Real generate() calls: the same tokens as without the lockstep, one turn per new token,
    and ratios computed from the turns."""
    from transformers import LlamaConfig, LlamaForCausalLM

    monkeypatch.setattr(bench, "sync", lambda: None)  # CPU
    monkeypatch.setattr(bench, "SWITCH", [switch])
    cfg = json.loads((REPO / "fixtures" / "hf" / "tiny-random-llama" / "config.json").read_text())
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**cfg)).eval()
    twin = copy.deepcopy(model)
    ids = torch.randint(3, 100, (2, 9))
    mask = torch.ones_like(ids)
    mask[1, :3] = 0
    alone = bench._gen_fn(model, ids * mask, mask, new=5)()
    outs = []
    bench._Lockstep((lambda streamer=None: outs.append(bench._gen_fn(twin, ids * mask, mask, new=5)(streamer)),
                     lambda streamer=None: outs.append(bench._gen_fn(model, ids * mask, mask, new=5)(streamer))),
                    first=1, switch=switch)
    assert all(torch.equal(o, alone) for o in outs)
    r = bench.timed_lockstep(bench._gen_fn(model, ids, new=5), bench._gen_fn(twin, ids, new=5), reps=3, warm=1)
    assert r["turns_per_call"] == 5 and r["method"] == "lockstep" and r["switch"] == switch
    assert torch.is_grad_enabled()  # the caller's grad mode survives the interleaved no_grad of generate()
    assert len(r["all_s"]) == len(r["twin_s"]) == len(r["pair_ratios"]) == 3
    assert r["ab_ratio"] == pytest.approx(sum(r["twin_s"]) / sum(r["all_s"]))
    assert 0 < r["ab_ci95"][0] <= r["ab_ci95"][1]
    assert min(r["pair_ratios"]) <= r["ab_ci95_calls"][0] <= r["ab_ci95_calls"][1] <= max(r["pair_ratios"])
    assert 0 < r["decode_ratio"] and 0 < r["step_ratio_median"]
    assert 0 < r["turn_cpu_over_wall"] <= 1.05


def test_prefill_columns_are_timed_against_the_twin_in_turn(monkeypatch):
    """With a twin, each prefill column is whole calls of the row and of the twin in turn (ABBA),
    the figure the median of the per-pair ratios; the twin's own calls are what is counted."""
    from transformers import LlamaConfig, LlamaForCausalLM

    monkeypatch.setattr(bench, "sync", lambda: None)  # CPU
    cfg = json.loads((REPO / "fixtures" / "hf" / "tiny-random-llama" / "config.json").read_text())
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(**cfg)).eval()
    twin = copy.deepcopy(model)
    order = []
    model.register_forward_pre_hook(lambda m, a: order.append("row"))
    twin.register_forward_pre_hook(lambda m, a: order.append("twin"))
    ids = torch.randint(3, 100, (1, 12))
    mask = torch.ones(2, 12, dtype=torch.long)
    mask[1, :4] = 0
    data = {"p4k": ids, "p16k": ids, "pad8": (torch.randint(3, 100, (2, 12)) * mask, mask)}
    cols = ("prefill_4k", "prefill_16k", "prefill_pad8")
    with torch.no_grad():
        res = bench.run_row(model, data, twin=twin, columns=cols)
    for col, pairs in zip(cols, (5, 3, 5)):
        r = res[col]
        assert len(r["all_s"]) == len(r["twin_s"]) == len(r["pair_ratios"]) == pairs
        assert r["pair_ratios"] == [a / b for a, b in zip(r["twin_s"], r["all_s"])]
        assert r["ab_ratio"] == sorted(r["pair_ratios"])[pairs // 2]
    # warm-up pairs (2, 1, 2), then ABBA: twin first in even pairs, the row first in odd ones
    timed = order[4:4 + 10]
    assert timed == ["twin", "row", "row", "twin", "twin", "row", "row", "twin", "twin", "row"]
    assert order.count("twin") == order.count("row") == 2 + 5 + 1 + 3 + 2 + 5
    without = bench.run_row(model, data, twin=None, columns=("prefill_4k",))
    assert "pair_ratios" not in without["prefill_4k"] and len(without["prefill_4k"]["all_s"]) == 5
