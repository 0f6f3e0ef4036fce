"""trtllm-serve command lines (sits_doctor.loaders.trtllm_serve) and what the command accepts per
release (sits_doctor.frameworks.trtllm_serve).

Tokens are built the way the shell and container loaders build them: split_shell on a YAML
scalar holding the script (site "shell"), or commands.words on a list of words (site "argv")."""

from __future__ import annotations

import pytest

from sits_doctor.fixes.config import remove
from sits_doctor.frameworks import trtllm_serve as fw
from sits_doctor.loaders import trtllm_serve
from sits_doctor.loaders.commands import split_shell, words
from sits_doctor.plan import Provenance, Setting
from sits_doctor.source_yaml import parse_yaml

SCRIPT = (
    "script: |\n"
    "  trtllm-serve serve meta-llama/Llama-3.1-8B --tp_size 2 --max_batch_size=64 \\\n"
    "    --kv_cache_free_gpu_memory_fraction 0.85 --trust_remote_code \\\n"
    "    --extra_llm_api_options ./extra.yml --max-seq-len 4096\n"
    "  echo done\n"
)


def shell_plan(text: str, path: str = "deploy/run.yaml", env=None):
    (doc,) = parse_yaml(text, path)
    tokens = split_shell(doc, doc.data["script"], "/script")
    return doc, trtllm_serve.plan_from_tokens(doc, tokens, label=path,
                                              anchor=Provenance.at(doc, "/script", key=False), env=env)


def applied(doc, fix) -> str:
    text = doc.text
    for e in sorted(fix.edits, key=lambda e: -e.start):
        text = text[:e.start] + e.new + text[e.end:]
    return text


def located(s: Setting) -> tuple:
    return (s.raw_key, s.value, s.prov.line, s.prov.col, s.site.kind,
            tuple((w.text, w.start, w.end) for w in s.site.words), s.site.inline)


def test_a_shell_command_becomes_llm_api_fields_with_their_words():
    doc, plan = shell_plan(SCRIPT)
    assert (plan.framework, plan.kind, plan.entry, plan.label) == (
        "trtllm", "trtllm-serve-args", "trtllm-serve serve", "deploy/run.yaml (trtllm-serve serve)")
    assert {k: located(s) for k, s in plan.settings.items()} == {
        "tensor_parallel_size": ("--tp_size", 2, 2, 46, "shell", (("--tp_size", 55, 64), ("2", 65, 66)), False),
        "max_batch_size": ("--max_batch_size", 64, 2, 58, "shell", (("--max_batch_size=64", 67, 86),), True),
        "kv_cache_config.free_gpu_memory_fraction": (
            "--kv_cache_free_gpu_memory_fraction", 0.85, 3, 5, "shell",
            (("--kv_cache_free_gpu_memory_fraction", 93, 128), ("0.85", 129, 133)), False),
        "trust_remote_code": ("--trust_remote_code", True, 3, 46, "shell", (("--trust_remote_code", 134, 153),), False),
        "extra_llm_api_options": ("--extra_llm_api_options", "./extra.yml", 4, 5, "shell",
                                  (("--extra_llm_api_options", 160, 183), ("./extra.yml", 184, 195)), False),
        # not an option of any release (click does not turn - into _): kept under its written name
        "--max-seq-len": ("--max-seq-len", "4096", 4, 41, "shell", (("--max-seq-len", 196, 209), ("4096", 210, 214)),
                          False),
    }
    assert [(s.raw, s.templated) for s in plan.settings.values()] == [
        ("2", False), ("64", False), ("0.85", False), (True, False), ("./extra.yml", False), ("4096", False)]
    m = plan.model_ref
    assert (m.key, m.value, m.prov.line, m.prov.col, m.site.kind, m.site.words[0][:3]) == (
        "model", "meta-llama/Llama-3.1-8B", 2, 22, "shell", ("meta-llama/Llama-3.1-8B", 31, 54))
    assert (plan.anchor.line, plan.anchor.col) == (4, 55)  # the last word: where an option would be added
    assert [w.text for w in plan.args_site.words][0] == "meta-llama/Llama-3.1-8B"
    assert len(plan.args_site.words) == 11 and plan.unchecked == 0
    assert (plan.file, plan.doc, plan.image, plan.env) == ("deploy/run.yaml", doc, None, {})


def test_removing_a_flag_takes_its_value_and_nothing_else():
    doc, plan = shell_plan(SCRIPT)
    fix = remove(plan.settings["tensor_parallel_size"], "remove --tp_size")
    assert [(e.start, e.end, e.new) for e in fix.edits] == [(54, 66, "")]
    assert applied(doc, fix).splitlines()[1] == (
        "  trtllm-serve serve meta-llama/Llama-3.1-8B --max_batch_size=64 \\")
    fix = remove(plan.settings["max_batch_size"], "remove --max_batch_size")
    assert [(e.start, e.end, e.new) for e in fix.edits] == [(66, 86, "")]
    assert applied(doc, fix).splitlines()[1] == "  trtllm-serve serve meta-llama/Llama-3.1-8B --tp_size 2 \\"
    fix = remove(plan.settings["trust_remote_code"], "remove --trust_remote_code")
    assert [(e.start, e.end, e.new) for e in fix.edits] == [(133, 153, "")]
    assert applied(doc, fix).splitlines()[2] == "    --kv_cache_free_gpu_memory_fraction 0.85 \\"
    fix = remove(plan.settings["--max-seq-len"], "remove --max-seq-len")
    assert applied(doc, fix).splitlines()[3] == "    --extra_llm_api_options ./extra.yml"


def test_list_items_are_argv_words_and_removal_takes_the_items():
    text = "args: [trtllm-serve, /models/llama, --max_seq_len, '8192', --backend, pytorch]\n"
    (doc,) = parse_yaml(text, "pod.yaml")
    tokens = words(doc, [("/args", doc.data["args"])])
    plan = trtllm_serve.plan_from_tokens(doc, tokens, label="pod", anchor=Provenance.at(doc, "/args", key=False))
    assert plan.entry == "trtllm-serve" and plan.model_ref.value == "/models/llama"
    s = plan.settings["max_seq_len"]
    assert (s.value, s.raw, s.site.kind, [w.pointer for w in s.site.words]) == (8192, "8192", "argv", ["/args/2", "/args/3"])
    assert plan.settings["backend"].value == "pytorch"
    fix = remove(s, "remove --max_seq_len")
    assert applied(doc, fix) == "args: [trtllm-serve, /models/llama, --backend, pytorch]\n"


def test_aliases_of_one_option_share_its_key_and_the_last_one_wins():
    _, plan = shell_plan("script: trtllm-serve m --tensor_parallel_size 4 --tp_size 8 --config a.yml "
                         "--free_gpu_memory_fraction 0.5 --ep_size 2 --pp_size=2 --cp_size 2\n")
    assert {k: (s.raw_key, s.value) for k, s in plan.settings.items()} == {
        "tensor_parallel_size": ("--tp_size", 8),
        "extra_llm_api_options": ("--config", "a.yml"),
        "kv_cache_config.free_gpu_memory_fraction": ("--free_gpu_memory_fraction", 0.5),
        "moe_expert_parallel_size": ("--ep_size", 2),
        "pipeline_parallel_size": ("--pp_size", 2),
        "context_parallel_size": ("--cp_size", 2),
    }


def test_server_options_keep_their_click_names_and_values_click_would_refuse_stay_text():
    _, plan = shell_plan("script: trtllm-serve --host 0.0.0.0 --port 8001 m --max_num_tokens lots "
                         "--log_level debug --custom_module_dirs a --custom_module_dirs b --max_beam_width\n")
    assert {k: (s.value, s.raw) for k, s in plan.settings.items()} == {
        "host": ("0.0.0.0", "0.0.0.0"), "port": (8001, "8001"), "max_num_tokens": ("lots", "lots"),
        "log_level": ("debug", "debug"), "custom_module_dirs": (["a", "b"], "b"),
        "max_beam_width": (None, None),  # click: "Option '--max_beam_width' requires an argument."
    }
    assert plan.model_ref.value == "m"  # options may come before MODEL


def test_an_is_flag_option_takes_no_value_and_an_unknown_flag_takes_the_next_word():
    _, plan = shell_plan("script: trtllm-serve m --enable_chunked_prefill true --no-such-flag x "
                         "--fail_fast_on_attention_window_too_large --bare\n")
    assert {k: (s.raw_key, s.value) for k, s in plan.settings.items()} == {
        "enable_chunked_prefill": ("--enable_chunked_prefill", True),
        "--no-such-flag": ("--no-such-flag", "x"),
        "fail_fast_on_attention_window_too_large": ("--fail_fast_on_attention_window_too_large", True),
        "--bare": ("--bare", True),
    }
    assert plan.model_ref.value == "m"  # "true" is a stray word click refuses; MODEL is the first


@pytest.mark.parametrize("script, entry, model", [
    ("trtllm-serve serve m", "trtllm-serve serve", "m"),
    ("trtllm-serve m", "trtllm-serve", "m"),
    ("/usr/local/bin/trtllm-serve m", "trtllm-serve", "m"),
    ("python3 -m tensorrt_llm.commands.serve serve m", "python -m tensorrt_llm.commands.serve serve", "m"),
    ("python -m tensorrt_llm.commands.serve m", "python -m tensorrt_llm.commands.serve", "m"),
    ("mpirun -n 2 trtllm-llmapi-launch trtllm-serve m --tp_size 2", "trtllm-serve", "m"),
    ("cd /w && trtllm-serve serve m; echo", "trtllm-serve serve", "m"),
    ("which trtllm-serve && pkill -f trtllm-serve; trtllm-serve m", "trtllm-serve", "m"),
])
def test_invocations(script, entry, model):
    _, plan = shell_plan(f"script: {script}\n")
    assert (plan.entry, plan.model_ref.value) == (entry, model)


@pytest.mark.parametrize("script", [
    "vllm serve m", "echo trtllm", "trtllm-serve disaggregated -c cfg.yaml",
    "trtllm-serve mm_embedding_serve m", "trtllm-serve grpc m", "python -m tensorrt_llm.commands.bench m",
    "echo trtllm-serve m", "command -v trtllm-serve",
])
def test_no_serve_command(script):
    _, plan = shell_plan(f"script: {script}\n")
    assert plan is None


def test_an_operator_ends_the_command():
    _, plan = shell_plan("script: trtllm-serve m --port 1 && curl --max_batch_size 2 localhost\n")
    assert list(plan.settings) == ["port"]
    _, plan = shell_plan("script: |\n  trtllm-serve m --port 1\n  --max_batch_size 2\n")
    assert list(plan.settings) == ["port"]


def test_variables_resolve_from_the_env_given_else_stay_unknown():
    bs = Setting(key="BS", raw_key="BS", value="16", raw="16")
    _, plan = shell_plan("script: trtllm-serve $MODEL --max_batch_size ${BS} --max_seq_len $LEN\n", env={"BS": bs})
    s = plan.settings["max_batch_size"]
    assert (s.value, s.templated, s.site.words[1].start) == (16, False, -1)  # resolved: no span to edit
    s = plan.settings["max_seq_len"]
    assert (s.value, s.templated) == ("$LEN", True)
    assert (plan.model_ref.value, plan.model_ref.templated, plan.unchecked) == ("$MODEL", True, 2)
    assert plan.env == {"BS": bs}
    fix = remove(s, "remove --max_seq_len")
    assert (fix.edits, fix.safety.value) == ((), "display")


def test_the_extra_options_file_beside_the_script():
    _, plan = shell_plan(SCRIPT)
    assert trtllm_serve.extra_options_path(plan) == "deploy/extra.yml"
    _, plan = shell_plan("script: trtllm-serve m --config cfg/serve.yaml\n", path="run.yaml")
    assert trtllm_serve.extra_options_path(plan) == "cfg/serve.yaml"
    for script in ("trtllm-serve m --config /etc/x.yml", "trtllm-serve m --config $CFG", "trtllm-serve m",
                   "trtllm-serve m --config ~/x.yml"):
        _, plan = shell_plan(f"script: {script}\n")
        assert trtllm_serve.extra_options_path(plan) is None, script


def test_find_invocation_returns_the_argument_words():
    (doc,) = parse_yaml("script: trtllm-serve serve m --port 1 | tee log\n", "r.yaml")
    args, how = trtllm_serve.find_invocation(split_shell(doc, doc.data["script"], "/script"))
    assert ([t.text for t in args], how) == (["m", "--port", "1"], "trtllm-serve serve")


# --- what each release accepts ------------------------------------------------------------------

def test_flags_per_release():
    assert fw.flags_at("0.17.0") is None  # before the first snapshot read
    at_018 = fw.flags_at("0.18.2")
    assert "--kv_cache_free_gpu_memory_fraction" in at_018 and "--extra_llm_api_options" not in at_018
    assert "--log_level" not in at_018 and len(at_018) == 12
    at_020 = fw.flags_at("0.20.0")
    assert {"--extra_llm_api_options", "--ep_size", "--reasoning_parser"} <= at_020 and "--config" not in at_020
    assert fw.flags_at("0.21.0") == at_020  # 0.21 was not read: the newest snapshot at or before it answers
    assert "--fail_fast_on_attention_window_too_large" in fw.flags_at("1.1.0rc6")
    assert "--enable_chunked_prefill" not in fw.flags_at("1.1.0rc6")
    assert "--enable_chunked_prefill" in fw.flags_at("1.1.0") and "--config" not in fw.flags_at("1.1.0")
    at_12 = fw.flags_at("1.2.0")
    assert {"--config", "--tensor_parallel_size", "--free_gpu_memory_fraction", "--revision"} <= at_12
    assert [r.version for r in fw.RELEASES] == ["0.18.2", "0.20.0", "1.1.0rc6", "1.1.0", "1.2.0"]
    assert [r.assumed for r in fw.RELEASES] == [False, False, False, True, True]


def test_every_flag_of_every_release_has_an_option():
    for release in fw.RELEASES:
        assert release.flags <= set(fw.BY_FLAG), release.version


def test_defaults_and_keys():
    assert fw.default_at("backend", "0.20.0") is None  # the TensorRT engine path
    assert fw.default_at("backend", "1.0.0") == "pytorch"
    assert fw.default_at("free_gpu_memory_fraction", "1.2.0") == 0.9
    assert fw.key_of("--tp_size") == "tensor_parallel_size"
    assert fw.key_of("--kv_cache_free_gpu_memory_fraction") == "kv_cache_config.free_gpu_memory_fraction"
    assert fw.key_of("--port") == "port"
    assert fw.key_of("--cluster_size") == "moe_cluster_parallel_size"
    assert fw.BY_DEST["moe_cluster_parallel_size"].field is None  # serve() discards it
    assert fw.key_of("--max-batch-size") is None


# --- through the rules ---------------------------------------------------------------------------

def test_a_serve_plan_goes_through_the_rules(monkeypatch, hermetic, tmp_path):
    """With the lead's wiring stood in for (the YAML file's plans are this module's), every rule
    runs on the plan without an internal error, and SITS001 points at --max_seq_len's words."""
    import json

    from sits_doctor import engine, loaders

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
        "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
        "num_hidden_layers": 32, "vocab_size": 128256, "max_position_embeddings": 131072,
        "torch_dtype": "bfloat16"}))
    script = tmp_path / "run.yaml"
    script.write_text(f"script: trtllm-serve {model} --max_seq_len 131072 --max_batch_size 8\n")

    def plans_of(doc, path, consumed, result):
        tokens = split_shell(doc, doc.data["script"], "/script")
        return [trtllm_serve.plan_from_tokens(doc, tokens, label=doc.path, anchor=Provenance.at(doc, "", key=False))]

    monkeypatch.setattr(loaders, "_plans_of", plans_of)
    report = engine.check([script], engine.CheckOptions(isolated=True, gpu="L4", targets=["trtllm==1.0.0"]))
    assert report.internal_errors == [] and report.errors == []
    (plan,) = report.deployments
    assert plan.model is not None and plan.facts.serving.max_model_len.value == 131072
    (finding,) = [f for f in report.findings if f.code == "SITS001"]
    text = script.read_text()
    col = text.index("--max_seq_len") + 1
    assert finding.render().startswith(
        f"{script}:1:{col}: SITS001 [error] max_seq_len 131072 (as set) is more than the KV pool on L4 (21.95 GiB) "
        "holds (about 39104 tokens): TensorRT-LLM 1.0.0 shrinks the attention window")
    (fix,) = finding.fixes
    at = text.index("131072")
    assert (fix.title, [(e.start, e.end, e.new) for e in fix.edits], fix.safety.value) == (
        "set max_seq_len to 24992 (what one sequence can hold at the low estimate)", [(at, at + 6, "24992")], "unsafe")


def test_words_already_expanded_by_the_caller_are_not_counted_again():
    (doc,) = parse_yaml("script: trtllm-serve m --max_seq_len $LEN --port $PORT\n", "r.yaml")
    tokens = split_shell(doc, doc.data["script"], "/script")
    port = Setting(key="PORT", raw_key="PORT", value="9000", raw="9000")
    anchor = Provenance.at(doc, "/script", key=False)
    plan = trtllm_serve.plan_from_tokens(doc, tokens, label="r", anchor=anchor, env={"PORT": port}, env_expands=False)
    assert plan.unchecked == 0 and plan.env == {"PORT": port}
    assert [(s.value, s.templated) for s in plan.settings.values()] == [("$LEN", True), ("$PORT", True)]
    plan = trtllm_serve.plan_from_tokens(doc, tokens, label="r", anchor=anchor, env={"PORT": port})
    assert plan.unchecked == 1
    assert [(s.value, s.templated) for s in plan.settings.values()] == [("$LEN", True), (9000, False)]
