"""Engines built before TensorRT-LLM 0.8: config.json with top-level ``builder_config`` and
``plugin_config`` (``BuilderConfig.to_dict()``), recognised as an engine config and turned into a
``trtllm-engine`` Plan whose model facts come from ``builder_config``."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from conftest import FIXTURES
from sits_doctor import engine
from sits_doctor.frameworks import transformers
from sits_doctor.frameworks import trtllm as trt
from sits_doctor.loaders import load_paths, trtllm
from sits_doctor.source import parse_json

LEGACY = FIXTURES / "trtllm" / "engine-pre08" / "config.json"
MODERN = FIXTURES / "trtllm" / "good_engine_llama31_8b_fp8_v1.0.json"


def legacy_data() -> dict:
    return json.loads(LEGACY.read_text())


def write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "engine" / "config.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def test_recognised_by_its_layout():
    data = legacy_data()
    assert trtllm.is_legacy_engine_config(data) and trtllm.is_engine_config(data)
    modern = json.loads(MODERN.read_text())
    assert trtllm.is_engine_config(modern) and not trtllm.is_legacy_engine_config(modern)
    # other tools name a mapping builder_config too (tfn jobs, site builders): not ours
    assert not trtllm.is_engine_config({"builder_config": {"builder_type": "cartesian_builder"}, "plugin_config": {}})
    assert not trtllm.is_engine_config({"builder_config": data["builder_config"]})  # no plugin_config
    assert not trtllm.is_engine_config({"builder_config": {"precision": "float16"}, "plugin_config": {}})  # one mark
    assert trtllm.is_engine_config({"builder_config": {"precision": "float16", "num_layers": 2}, "plugin_config": {}})
    both = {**data, "pretrained_config": {}}
    assert not trtllm.is_legacy_engine_config(both) and not trtllm.is_engine_config(both)
    assert not trtllm.is_engine_config([data]) and not trtllm.is_legacy_engine_config("builder_config")


def test_the_plan_and_its_settings_as_written():
    (plan,) = load_paths([str(LEGACY)]).plans
    assert (plan.framework, plan.kind, plan.label, plan.file) == (
        "trtllm", "trtllm-engine", f"TensorRT-LLM engine (pre-0.8 layout) {plan.file}", plan.file)
    assert plan.file.endswith("fixtures/trtllm/engine-pre08/config.json")
    assert (plan.anchor.pointer, plan.anchor.line, plan.anchor.col) == ("/builder_config", 2, 21)
    got = {k: (plan.settings[k].value, plan.settings[k].prov.line, plan.settings[k].prov.col)
           for k in ("builder_config.max_batch_size", "builder_config.max_input_len", "builder_config.max_output_len",
                     "builder_config.max_num_tokens", "builder_config.tensor_parallel", "builder_config.name",
                     "plugin_config.paged_kv_cache", "plugin_config.tokens_per_block",
                     "plugin_config.gpt_attention_plugin")}
    assert got == {
        "builder_config.max_batch_size": (8, 9, 5), "builder_config.max_input_len": (2048, 11, 5),
        "builder_config.max_output_len": (512, 13, 5), "builder_config.max_num_tokens": (None, 12, 5),
        "builder_config.tensor_parallel": (1, 26, 5), "builder_config.name": ("llama", 17, 5),
        "plugin_config.paged_kv_cache": (True, 44, 5), "plugin_config.tokens_per_block": (128, 51, 5),
        "plugin_config.gpt_attention_plugin": ("float16", 36, 5),
    }
    assert len(plan.settings) == 2 + 26 + 26  # the two mappings and every key of each
    assert plan.settings["builder_config.max_batch_size"].site.pointer == "/builder_config/max_batch_size"
    assert plan.model_ref is None and plan.entry == ""


def test_model_facts_from_builder_config():
    (plan,) = load_paths([str(LEGACY)]).plans
    assert plan.model.text_pointer == "/builder_config"
    dims = transformers.model_dims(plan.model)
    got = {name: (v.value, v.prov.line if v.prov.kind == "file" else v.prov.kind) for name, v in (
        ("layers", dims.layers), ("heads", dims.heads), ("kv_heads", dims.kv_heads), ("hidden", dims.hidden),
        ("vocab", dims.vocab), ("intermediate", dims.intermediate), ("dtype", dims.dtype),
        ("max_positions", dims.max_positions), ("head_dim", dims.head_dim))}
    assert got == {
        "layers": (32, 20), "heads": (32, 18), "kv_heads": (32, 19), "hidden": (4096, 6), "vocab": (32000, 28),
        "intermediate": (11008, 16),  # mlp_hidden_size
        "dtype": ("float16", 23),  # precision
        "max_positions": (4096, 14), "head_dim": (128, "derived"),
    }
    assert dims.architecture is None and dims.model_type is None
    assert dims.params.value == 2 * 32000 * 4096 + 32 * (4 * 4096 * 4096 + 3 * 4096 * 11008)  # Llama-2-7B, norms left out
    assert transformers.invalid_facts(plan.model) == []


def test_multi_query_mode_means_one_kv_head(tmp_path):
    data = legacy_data()
    del data["builder_config"]["num_kv_heads"]
    data["builder_config"]["multi_query_mode"] = True
    (plan,) = load_paths([str(write(tmp_path, data))]).plans
    kv = transformers.model_dims(plan.model).kv_heads
    assert (kv.value, kv.prov.kind) == (1, "derived")
    assert kv.prov.note.startswith("builder_config.multi_query_mode: true (") and kv.prov.note.endswith("): one KV head")
    data["builder_config"]["multi_query_mode"] = False
    (plan,) = load_paths([str(write(tmp_path, data))]).plans
    assert transformers.model_dims(plan.model).kv_heads.value == 32  # = num_heads


def test_stated_names_win_over_builder_config_aliases(tmp_path):
    data = legacy_data()
    data["builder_config"]["intermediate_size"] = 1000  # a build script that wrote both
    (plan,) = load_paths([str(write(tmp_path, data))]).plans
    assert transformers.model_dims(plan.model).intermediate.value == 1000


def test_serving_facts(hermetic):
    report = engine.check([LEGACY], engine.CheckOptions(isolated=True, gpu="L4", targets=["trtllm==0.7.1"]))
    assert report.internal_errors == [] and report.errors == [] and report.findings == []
    (plan,) = report.deployments
    assert trt.is_legacy_engine(plan)
    s = plan.facts.serving
    assert (s.max_model_len.value, s.max_model_len.prov.kind) == (2560, "derived")
    assert s.max_model_len.prov.note.startswith("max_input_len 2048 (") and "max_output_len 512 (" in s.max_model_len.prov.note
    assert [(v.value, v.prov.line) for v in (s.max_num_seqs, s.block_size, s.tensor_parallel, s.pipeline_parallel)] == [
        (8, 9), (128, 51), (1, 26), (1, 22)]
    assert s.max_num_batched_tokens.value is None
    assert (s.kv_cache_dtype, s.memory_fraction, s.cuda_graphs, s.prefix_caching) == (None, None, None, None)
    assert str(plan.target) == "TensorRT-LLM 0.7.1 (--target)"


def test_block_size_only_with_paged_kv(hermetic, tmp_path):
    data = legacy_data()
    data["plugin_config"]["paged_kv_cache"] = False
    report = engine.check([write(tmp_path, data)], engine.CheckOptions(isolated=True, targets=["trtllm==0.7.1"]))
    (plan,) = report.deployments
    assert plan.facts.serving.block_size is None


def test_a_modern_engine_is_unchanged():
    (plan,) = load_paths([str(MODERN)]).plans
    assert not trt.is_legacy_engine(plan) and plan.model.text_pointer == "/pretrained_config"
    assert plan.label == f"TensorRT-LLM engine {plan.file}"


def test_an_engine_too_long_for_the_gpu_is_reported(hermetic, tmp_path):
    data = legacy_data()
    data["builder_config"].update(max_input_len=32768, max_output_len=32768)
    path = write(tmp_path, data)
    report = engine.check([path], engine.CheckOptions(isolated=True, gpu="T4", targets=["trtllm==0.7.1"]))
    assert report.internal_errors == [] and report.errors == []
    (finding,) = report.findings
    assert (finding.code, finding.location.line, finding.location.col) == ("SITS001", 2, 21)  # the anchor
    assert finding.message.startswith("max_seq_len 65536 ")
    assert finding.fixes == () and finding.fix_hint.startswith("rebuild the engine with trtllm-build --max_seq_len ≤ ")


def test_the_cli_walks_the_trtllm_fixtures_without_internal_errors(hermetic):
    report = engine.check([FIXTURES / "trtllm"], engine.CheckOptions(isolated=True, gpu="L4"))
    assert report.internal_errors == [] and report.errors == []
    assert any(trt.is_legacy_engine(p) for p in report.deployments)


@pytest.mark.parametrize("bad", [
    {"num_layers": "32"}, {"num_heads": 0}, {"hidden_size": -1}, {"vocab_size": 1.5},
])
def test_invalid_dimensions_are_input_errors(hermetic, tmp_path, bad):
    data = copy.deepcopy(legacy_data())
    data["builder_config"].update(bad)
    report = engine.check([write(tmp_path, data)], engine.CheckOptions(isolated=True, targets=["trtllm==0.7.1"]))
    assert report.internal_errors == []
    (key,) = bad
    assert [e.message.split(":")[1].strip().split(" ")[0] for e in report.errors] == [key]


def test_parse_json_of_the_fixture_positions():
    doc = parse_json(LEGACY.read_text(), "config.json")
    plan = trtllm.plan_from_engine(doc)
    assert plan.kind == "trtllm-engine" and plan.model.path == "config.json"
