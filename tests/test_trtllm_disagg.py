"""``trtllm-serve disaggregated -c`` configs (sits_doctor.loaders.trtllm_disagg): recognised as
such, one LLM-API plan per server section at the positions written, the disaggregated reader's
own keys never reported (issue 26, case 1)."""

from __future__ import annotations

from sits_doctor import engine
from sits_doctor.frameworks import trtllm_disagg as fw
from sits_doctor.loaders import load_paths, trtllm_disagg
from sits_doctor.plan import Provenance
from sits_doctor.source_yaml import parse_yaml

DISAGG = """\
hostname: localhost
port: 8000
max_retries: 2
model: TinyLlama/TinyLlama-1.1B-Chat-v1.0
free_gpu_memory_fraction: 0.25
backend: pytorch
context_servers:
  num_instances: 1
  tensor_parallel_size: 2
  kv_cache_config:
    free_gpu_memory_fraction: 0.2
  urls:
    - "localhost:8001"
generation_servers:
  num_instances: 1
  router:
    type: kv_cache_aware
  urls:
    - "localhost:8002"
"""


def section_plans(text: str = DISAGG, path: str = "disagg.yaml"):
    (doc,) = parse_yaml(text, path)
    return doc, trtllm_disagg.plans(doc)


def where(plan, key):
    s = plan.get(key)
    return s.value, s.prov.line, s.prov.col


def check(tmp_path, text, name="disagg.yaml", targets=()):
    path = tmp_path / name
    path.write_text(text)
    return engine.check([path], engine.CheckOptions(isolated=True, targets=list(targets)))


def test_each_section_is_a_plan_of_what_its_workers_get():
    doc, (ctx, gen) = section_plans()
    assert [(p.kind, p.entry, p.label) for p in (ctx, gen)] == [
        ("trtllm-llmapi", fw.WORKER_ENTRY, "TensorRT-LLM disaggregated serving config disagg.yaml (context_servers)"),
        ("trtllm-llmapi", fw.WORKER_ENTRY, "TensorRT-LLM disaggregated serving config disagg.yaml (generation_servers)"),
    ]
    # the top-level keys that are not the server's own are copied into both sections, at their line
    for plan in (ctx, gen):
        assert where(plan, "model") == ("TinyLlama/TinyLlama-1.1B-Chat-v1.0", 4, 1)
        assert where(plan, "backend") == ("pytorch", 6, 1)
        assert plan.model_ref is plan.get("model")
        for own in ("hostname", "port", "max_retries", "context_servers", "generation_servers",
                    "num_instances", "urls", "router", "urls.0", "router.type"):
            assert plan.get(own) is None, own
    assert where(ctx, "tensor_parallel_size") == (2, 9, 3)
    assert where(ctx, "kv_cache_config.free_gpu_memory_fraction") == (0.2, 11, 5)
    assert gen.get("tensor_parallel_size") is None
    assert (ctx.anchor.line, gen.anchor.line) == (7, 14)


def test_a_section_key_replaces_the_inherited_one_and_its_children():
    text = "backend: pytorch\nkv_cache_config:\n  dtype: fp8\ncontext_servers:\n  kv_cache_config:\n    enable_block_reuse: false\n"
    _, (ctx,) = section_plans(text)
    assert ctx.get("kv_cache_config.dtype") is None
    assert where(ctx, "kv_cache_config.enable_block_reuse") == (False, 6, 5)
    assert where(ctx, "backend") == ("pytorch", 1, 1)


def test_sniffed_before_llm_api_yaml(tmp_path):
    path = tmp_path / "disagg.yaml"
    path.write_text(DISAGG)
    result = load_paths([path])
    assert [p.label.rsplit("(", 1)[-1] for p in result.plans] == ["context_servers)", "generation_servers)"]
    assert fw.is_disagg_config({"generation_servers": {}}) and not fw.is_disagg_config({"context_servers": [1]})
    assert not fw.is_disagg_config(["context_servers"])


def test_the_disaggregated_readers_own_keys_are_never_reported(tmp_path):
    report = check(tmp_path, DISAGG)
    assert report.findings == [] and report.errors == []


def test_a_bad_key_is_reported_once_at_its_own_position(tmp_path):
    text = DISAGG.replace("backend: pytorch\n", "backend: pytorch\nprint_iter_logs: true\n").replace(
        "    type: kv_cache_aware\n", "    type: kv_cache_aware\n  max_batch_sise: 8\n")
    report = check(tmp_path, text)
    got = [(f.code, f.severity.value, f.location.line, f.location.col, f.message) for f in report.findings]
    assert got == [
        ("SITS204", "error", 7, 1,
         "print_iter_logs is not a field of TorchLlmArgs: the context_servers and "
         "generation_servers workers of TensorRT-LLM 1.2.0 (assumed) refuse to start"),
        ("SITS204", "error", 19, 3,
         "max_batch_sise is not a field of TorchLlmArgs: the generation_servers workers of "
         "TensorRT-LLM 1.2.0 (assumed) refuse to start"),
    ]
    assert f"why: {fw.WORKER_ENTRY} builds each generation_servers worker's LLM from its section" in report.findings[1].evidence
    assert [f.fix_hint for f in report.findings] == ['did you mean "print_iter_log"?', 'did you mean "max_batch_size"?']


def test_get_llm_args_parameters_are_accepted_only_in_a_section(tmp_path):
    # free_gpu_memory_fraction is a get_llm_args() parameter: the worker accepts it, a plain
    # --config file does not (it is no LlmArgs field)
    assert check(tmp_path, DISAGG).findings == []
    plain = check(tmp_path, "backend: pytorch\nfree_gpu_memory_fraction: 0.25\n", "plain.yaml")
    (finding,) = plain.findings
    assert finding.severity.value == "error" and finding.location.line == 2
    assert finding.fix_hint.startswith("--free_gpu_memory_fraction is trtllm-serve's command-line flag; "
                                       "in the YAML its value goes to kv_cache_config.free_gpu_memory_fraction")


def test_unchecked_release_is_said_once_per_file(tmp_path):
    report = check(tmp_path, DISAGG, targets=["trtllm==1.3.0"])
    (finding,) = report.findings
    assert (finding.severity.value, finding.location.line) == ("info", 7)
    assert finding.message.startswith("the LLM-API options of TensorRT-LLM 1.3.0 were not checked")


def test_reported_elsewhere_and_workers():
    doc, (ctx, gen) = section_plans()
    top, own = Provenance.at(doc, "/model"), Provenance.at(doc, "/generation_servers/router")
    assert trtllm_disagg.reported_elsewhere(ctx, top) is False
    assert trtllm_disagg.reported_elsewhere(gen, top)
    assert trtllm_disagg.reported_elsewhere(gen, own) is False
    assert trtllm_disagg.workers(ctx, top) == "context_servers and generation_servers"
    assert trtllm_disagg.workers(gen, own) == "generation_servers"
    plain = ctx.copy(entry="")
    assert trtllm_disagg.workers(plain, top) is None and not trtllm_disagg.reported_elsewhere(plain, top)
    # a section-like pointer prefix is not the section ("/context_servers_x" is not under "/context_servers")
    assert trtllm_disagg.workers(ctx, Provenance(pointer="/context_serversx/a")) == "context_servers and generation_servers"
