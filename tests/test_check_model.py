"""sits_doctor.check_model: the rules on a live transformers model (tiny models built from configs
on the CPU; nothing is downloaded)."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from transformers import (  # noqa: E402
    AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM, MistralConfig, RecurrentGemmaConfig,
)

import sits_doctor  # noqa: E402
from sits_doctor.engine import CheckOptions, check, gpu_spec  # noqa: E402
from sits_doctor.finding import Safety, Severity  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
VERSION = transformers.__version__
SRC = "live model {} (transformers " + VERSION + ")"
TINY = dict(num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
            vocab_size=128)


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Any attempt to open a connection fails the test (check_model must never download)."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args!r}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


def llama(**extra):
    return LlamaForCausalLM(LlamaConfig(**TINY, **extra))


def runtime(report):
    (plan,) = report.deployments
    return plan.facts.runtime


def test_the_network_guard_works():
    with pytest.raises(AssertionError, match="network access attempted"):
        socket.create_connection(("huggingface.co", 443))


def test_a_default_llama_runs_sdpa_with_rope_once_per_forward():
    report = sits_doctor.check_model(llama())
    rt = runtime(report)
    assert (rt.attention.value, rt.supports_sdpa.value, rt.rope.value) == ("sdpa", True, "model")
    assert rt.rotary_modules == ("model.rotary_emb",)
    assert rt.cache.value == "DynamicCache" and rt.quantizer is None
    assert (rt.dtype.value, rt.device.value, rt.model_class) == ("float32", "cpu", "LlamaForCausalLM")
    assert str(rt.attention.prov) == SRC.format("LlamaForCausalLM")
    assert report.findings == [] and report.exit_code == 0
    (row,) = report.runtime
    assert row["file"] == "<model LlamaForCausalLM>" and row["attention"] == "sdpa" and row["dtype"] == "float32"
    # the target is the installed transformers; without a GPU the memory rule says it did not run
    (plan,) = report.plans
    assert plan.target.startswith(f"transformers {VERSION} (installed package")
    assert any("SITS001" in n.message and 'gpu="NAME[xN]"' in n.message for n in report.notices)


def test_eager_when_built_with_eager_and_the_live_setting_wins():
    eager = AutoModelForCausalLM.from_config(LlamaConfig(**TINY), attn_implementation="eager")
    assert runtime(sits_doctor.check_model(eager)).attention.value == "eager"
    model = llama()
    assert runtime(sits_doctor.check_model(model)).attention.value == "sdpa"
    model.set_attn_implementation("eager")  # changed after loading: what runs now is what counts
    assert runtime(sits_doctor.check_model(model)).attention.value == "eager"


def test_mistral():
    model = AutoModelForCausalLM.from_config(MistralConfig(**TINY, sliding_window=32))
    report = sits_doctor.check_model(model)
    rt = runtime(report)
    assert (rt.model_class, rt.attention.value, rt.rope.value) == ("MistralForCausalLM", "sdpa", "model")
    dims = report.deployments[0].facts.model
    assert (dims.sliding_window.value, dims.layers.value, dims.architecture.value) == (32, 2, "MistralForCausalLM")


def test_dtype_is_the_parameters_dtype_for_the_rules_too():
    model = llama().to(torch.bfloat16)
    report = sits_doctor.check_model(model)
    assert runtime(report).dtype.value == "bfloat16"
    assert report.deployments[0].facts.model.dtype.value == "bfloat16"  # weights and KV are sized at 2 bytes


def _eager_config_json(tmp_path, model):
    # what save_pretrained writes (the class, the weights' dtype), and the implementation asked for
    data = {**model.config.to_dict(), "architectures": [type(model).__name__], "dtype": "float32",
            "attn_implementation": "eager"}
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(data))
    return str(folder / "config.json")


@pytest.mark.parametrize("config_class", [LlamaConfig, MistralConfig])
def test_check_model_reports_what_check_runtime_reports_for_the_same_config(tmp_path, config_class):
    model = AutoModelForCausalLM.from_config(config_class(**TINY), attn_implementation="eager")
    path = _eager_config_json(tmp_path, model)
    built = check([path], CheckOptions(runtime=True, isolated=True))
    assert not [n for n in built.notices if "--runtime" in n.message], "check --runtime fell back to the tables"
    assert built.runtime[0]["how"].startswith("built with transformers")
    live = sits_doctor.check_model(model)
    keys = ("model_class", "attention", "supports_sdpa", "rope", "rotary_modules", "cache", "quantizer", "custom_code")
    (row_built,), (row_live,) = built.runtime, live.runtime
    assert {k: row_live[k] for k in keys} == {k: row_built[k] for k in keys}
    assert row_live["attention"] == "eager" and row_live["how"] != row_built["how"]
    assert runtime(live).dtype.value == built.deployments[0].facts.runtime.dtype.value == "float32"
    assert runtime(live).device.value == "cpu" and built.deployments[0].facts.runtime.device is None
    values = lambda dims: {k: (None if v is None else v.value) for k, v in dims._asdict().items()}  # noqa: E731
    assert values(live.deployments[0].facts.model) == values(built.deployments[0].facts.model)


def test_a_finding_names_the_model_and_its_attribute_and_its_fix_is_advice(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = llama(max_position_embeddings=131072)
    model.generation_config.max_length = 10**9
    report = sits_doctor.check_model(model, gpu="L4")
    (f,) = [f for f in report.findings if f.code == "SITS001"]  # (float32 on an L4 is another rule's)
    assert f.severity == Severity.WARNING
    assert (f.location.file, f.location.line, f.location.col) == ("<model LlamaForCausalLM>", 0, 0)
    assert f.location.pointer == "/generation_config/max_length"
    assert f.render().startswith("<model LlamaForCausalLM>: SITS001 [warning] generation_config max_length "
                                 "1000000000 with no max_new_tokens")
    assert f.plan == "live model LlamaForCausalLM"
    (fix,) = f.fixes
    assert fix.safety == Safety.DISPLAY and fix.edits == () and fix.file == "<model LlamaForCausalLM>"
    assert "model.generation_config.max_length" in fix.why_not
    text = "\n".join([f.message, *f.evidence, f.fix_hint or ""])
    assert not re.search(r">:\d+:\d+", text), text  # no positions in the stand-in documents leak out
    assert list(tmp_path.iterdir()) == []  # nothing written anywhere
    from sits_doctor.reporters import json_report, text as text_report

    shown = text_report.render(report)
    assert f.render() in shown.splitlines()
    assert "<model LlamaForCausalLM>: runtime: LlamaForCausalLM (live model in this process" in shown
    data = json.loads(json_report.render(report))
    (found,) = [x for x in data["findings"] if x["code"] == "SITS001"]
    assert found["location"] == {"file": "<model LlamaForCausalLM>", "line": 0, "col": 0,
                                               "pointer": "/generation_config/max_length", "doc": 0}
    # with max_new_tokens set the sequence is bounded: no finding
    model.generation_config.max_new_tokens = 256
    assert [f for f in sits_doctor.check_model(model, gpu="L4").findings if f.code == "SITS001"] == []


def test_a_cache_implementation_the_installed_transformers_rejects():
    model = llama()
    model.generation_config.cache_implementation = "sliding_windw"  # attribute assignment does not validate
    (f,) = sits_doctor.check_model(model).findings
    assert f.code == "SITS204" and f.location.pointer == "/generation_config/cache_implementation"
    assert runtime(sits_doctor.check_model(model)).cache.value == "sliding_windw"


def test_evidence_citing_a_config_value_names_the_attribute():
    from sits_doctor.live_model import _LiveDocs
    from sits_doctor.rules.sits004_rope_recomputed_per_layer import RULE

    model = llama()
    docs = _LiveDocs(model)
    plan = docs.plan()
    setting = plan.settings["rope_parameters.rope_type"]
    assert re.fullmatch(r"<model LlamaForCausalLM>:\d+:\d+", str(setting.prov))
    finding = RULE.finding(plan, setting, f"message citing {setting.prov}", evidence=[f"= {setting.prov}"])
    moved = docs.relocate(finding)
    assert moved.message == "message citing model.config.rope_parameters['rope_type']"
    assert moved.evidence == ("= model.config.rope_parameters['rope_type']",)
    assert moved.location.pointer == "/rope_parameters/rope_type" and moved.location.line == 0


def test_rope_in_every_layer_is_sits004_on_the_live_model():
    config = RecurrentGemmaConfig(**{**TINY, "num_hidden_layers": 3, "num_key_value_heads": 1}, lru_width=64,
                                  attention_window_size=16)
    model = AutoModelForCausalLM.from_config(config)
    report = sits_doctor.check_model(model)
    rt = runtime(report)
    assert rt.rope.value == "attention" and rt.rotary_modules == ("model.layers.*.temporal_block.rotary_emb",)
    (f,) = report.findings
    assert f.code == "SITS004" and f.location.file == "<model RecurrentGemmaForCausalLM>"
    assert f.location.pointer == "/model_type"
    assert f"where: {SRC.format('RecurrentGemmaForCausalLM')}" in f.evidence
    assert "rotary modules: model.layers.*.temporal_block.rotary_emb" in f.evidence


def test_the_quantizer_is_the_one_the_live_model_holds():
    model = llama()
    model.config.quantization_config = {"quant_method": "fp8", "activation_scheme": "dynamic"}
    from transformers.quantizers.auto import AUTO_QUANTIZER_MAPPING

    assert runtime(sits_doctor.check_model(model)).quantizer.value == AUTO_QUANTIZER_MAPPING["fp8"].__name__

    class LoadedWithThisHfQuantizer:
        pass

    model.hf_quantizer = LoadedWithThisHfQuantizer()
    assert runtime(sits_doctor.check_model(model)).quantizer.value == "LoadedWithThisHfQuantizer"


def test_gpu_is_parsed_as_the_cli_parses_it():
    report = sits_doctor.check_model(llama(), gpu="H100x2")
    gpu = report.deployments[0].facts.gpu
    assert gpu == gpu_spec(CheckOptions(gpu="H100x2")) and gpu.count == 2 and gpu.name.startswith("H100")
    assert not any("SITS001" in n.message for n in report.notices)
    with pytest.raises(ValueError, match=r"gpu='H9000'"):
        sits_doctor.check_model(llama(), gpu="H9000")


@pytest.mark.parametrize("workload", ["chat", {"prompt_tokens": 512}, 0])
def test_a_workload_is_refused_clearly(workload):
    with pytest.raises(ValueError, match=r"workloads are not supported yet; check_model accepts only workload=None"):
        sits_doctor.check_model(llama(), workload=workload)


def test_a_compiled_or_peft_wrapped_model_is_checked_through_the_model_inside():
    model = AutoModelForCausalLM.from_config(LlamaConfig(**TINY), attn_implementation="eager")
    compiled = torch.compile(model)  # nothing is compiled until it is called
    assert not isinstance(compiled, transformers.PreTrainedModel)
    assert runtime(sits_doctor.check_model(compiled)).attention.value == "eager"

    class PeftLike(torch.nn.Module):  # the part of peft.PeftModel check_model relies on
        def __init__(self, base):
            super().__init__()
            self.base_model = base

        def get_base_model(self):
            return self.base_model

    report = sits_doctor.check_model(torch.compile(PeftLike(model)))
    assert runtime(report).model_class == "LlamaForCausalLM" and runtime(report).attention.value == "eager"


@pytest.mark.parametrize("thing", ["meta-llama/Llama-3.1-8B", torch.nn.Linear(2, 2), None])
def test_only_a_transformers_model_is_accepted(thing):
    with pytest.raises(TypeError, match="needs a transformers PreTrainedModel"):
        sits_doctor.check_model(thing)


def test_import_and_attribute_stay_light():
    code = ("import sys, sits_doctor; f = sits_doctor.check_model; "
            "print(sorted(m for m in ('torch', 'transformers', 'triton') if m in sys.modules)); print(f.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True).stdout
    assert out.split("\n")[:2] == ["[]", "sits_doctor.live_model"]
    assert "check_model" in sits_doctor.__all__


def test_readme_example_is_what_it_prints():
    import doctest

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme.split("<!-- check-model:start -->", 1)[1].split("<!-- check-model:end -->", 1)[0]
    body = block.strip().removeprefix("```pycon\n").removesuffix("```")
    test = doctest.DocTestParser().get_doctest(body, {}, "README check_model", "README.md", 0)
    assert len(test.examples) >= 6
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test, out=lambda text: pytest.fail(text))
    assert runner.failures == 0


def test_attributes_are_named_as_python_reaches_them():
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration

    from sits_doctor.live_model import _LiveDocs

    docs = _LiveDocs(llama())
    assert docs.attribute("/rope_parameters/rope_type") == "model.config.rope_parameters['rope_type']"
    assert docs.attribute("/architectures/0") == "model.config.architectures[0]"
    assert docs.attribute("/generation_config/eos_token_id") == "model.generation_config.eos_token_id"
    with torch.device("meta"):  # a multimodal model: its text model's config is an attribute, not a dict
        model = Gemma3ForConditionalGeneration(Gemma3Config())
    docs = _LiveDocs(model)
    assert docs.attribute("/text_config/num_hidden_layers") == "model.config.text_config.num_hidden_layers"
    report = sits_doctor.check_model(model)
    assert report.deployments[0].facts.model.layers.value == model.config.text_config.num_hidden_layers
    assert runtime(report).rotary_modules == ("model.language_model.rotary_emb",)


def test_a_gpu_spec_is_taken_as_given_and_other_types_are_refused():
    from sits_doctor.facts import GpuSpec

    spec = GpuSpec(name="MyCard", count=1, memory_gib=8.0, source="measured")
    assert sits_doctor.check_model(llama(), gpu=spec).deployments[0].facts.gpu == spec
    with pytest.raises(TypeError, match="gpu must be a catalog name"):
        sits_doctor.check_model(llama(), gpu=80)
