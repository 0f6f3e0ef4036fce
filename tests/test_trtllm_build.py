"""trtllm-build command lines in scripts (sits_doctor.loaders.trtllm_build): read as the engine
they build, keyed like its config.json, so the engine rules judge them (issue 26, case 4)."""

from __future__ import annotations

from sits_doctor import engine
from sits_doctor.frameworks import trtllm_build as fw
from sits_doctor.loaders import load_paths, trtllm_build
from sits_doctor.loaders.script import _tokens, parse_script

BUILD = """#!/bin/bash
CKPT=/ckpt
trtllm-build --checkpoint_dir $CKPT --output_dir /engine \\
  --context_fmha disable --paged_kv_cache enable --remove_input_padding=disable \\
  --max_batch_size 16 --max_input_len 1024 --max_seq_len 4096 --max_num_tokens 8192 \\
  --tokens_per_block 64 --kv_cache_type paged --dry_run --max_beam_width $BEAMS
"""


def plan_of(text: str, path: str = "build.sh"):
    doc = parse_script(text, path)
    tokens = _tokens(doc, doc.derived["shell-words"], 0)
    return doc, trtllm_build.plan_from_tokens(doc, tokens, label=path, anchor=tokens[0].prov)


def run(tmp_path, text, name="build.sh", **opts):
    path = tmp_path / name
    path.write_text(text)
    return engine.check([path], engine.CheckOptions(isolated=True, **opts))


def test_flags_become_engine_config_keys_with_their_positions():
    _, plan = plan_of(BUILD)
    assert (plan.framework, plan.kind, plan.entry) == ("trtllm", "trtllm-engine", "trtllm-build")
    got = {k: (s.raw_key, s.value, s.prov.line, s.prov.col, s.site.inline) for k, s in plan.settings.items()}
    def at(flag, value, inline=False):
        line = next(n for n, text in enumerate(BUILD.splitlines(), 1) if f" {flag}" in text)
        return flag, value, line, BUILD.splitlines()[line - 1].index(f" {flag}") + 2, inline

    assert got == {
        "checkpoint_dir": at("--checkpoint_dir", "$CKPT"),
        "output_dir": at("--output_dir", "/engine"),
        "build_config.plugin_config.context_fmha": at("--context_fmha", False),
        "build_config.plugin_config.paged_kv_cache": at("--paged_kv_cache", True),
        "build_config.plugin_config.remove_input_padding": at("--remove_input_padding", False, True),
        "build_config.max_batch_size": at("--max_batch_size", 16),
        "build_config.max_input_len": at("--max_input_len", 1024),
        "build_config.max_seq_len": at("--max_seq_len", 4096),
        "build_config.max_num_tokens": at("--max_num_tokens", 8192),
        "build_config.plugin_config.tokens_per_block": at("--tokens_per_block", 64),
        "build_config.kv_cache_type": at("--kv_cache_type", "PAGED"),
        "dry_run": at("--dry_run", True),
        "build_config.max_beam_width": at("--max_beam_width", "$BEAMS"),
    }
    assert got["build_config.plugin_config.context_fmha"][2:4] == (4, 3)
    assert plan.get("build_config.max_beam_width").templated
    assert plan.get("checkpoint_dir").templated  # not expanded here: the script loader expands


def test_a_script_feeds_the_engine_facts(tmp_path):
    report = run(tmp_path, BUILD.replace(" --max_beam_width $BEAMS", ""))
    (plan,) = report.deployments
    serving = plan.facts.serving
    assert (serving.max_model_len.value, serving.max_num_seqs.value, serving.max_num_batched_tokens.value,
            serving.block_size.value) == (4096, 16, 8192, 64)
    assert (serving.max_model_len.prov.line, serving.block_size.prov.line) == (5, 6)
    (fmha,) = [f for f in report.findings if f.code == "SITS003"]
    assert (fmha.location.line, fmha.location.col) == (4, 3)
    assert [f.code for f in report.findings] == ["SITS003"]


def test_values_a_rule_does_not_know_stay_as_written():
    _, plan = plan_of("trtllm-build --context_fmha maybe --max_seq_len lots --kv_cache_type continuous\n")
    assert [s.value for s in plan.settings.values()] == ["maybe", "lots", "CONTINUOUS"]
    assert fw.convert(fw.FLAGS["--gpt_attention_plugin"], "auto") == "auto"


def test_how_the_build_is_started():
    assert plan_of("python3 -m tensorrt_llm.commands.build --max_seq_len 8\n")[1].entry == \
        "python -m tensorrt_llm.commands.build"
    assert plan_of("/usr/local/bin/trtllm-build --max_seq_len 8\n")[1].get("build_config.max_seq_len").value == 8
    for text in ("which trtllm-build\n", "echo trtllm-build --max_seq_len 8\n", "python3 -m other --a b\n",
                 "trtllm-serve m --port 1\n"):
        assert plan_of(text)[1] is None, text
    # a later command in the same words is found after an operator, and ends at the next one
    _, plan = plan_of("echo start && trtllm-build --max_seq_len 8 ; ls --all\n")
    assert list(plan.settings) == ["build_config.max_seq_len"]
    _, plan = plan_of("trtllm-build --max_seq_len\n")
    assert plan.get("build_config.max_seq_len").value is None  # argparse: expected one argument
    _, plan = plan_of("trtllm-build\n")
    assert plan.settings == {} and plan.args_site is None


def test_script_with_build_and_serve_has_two_plans(tmp_path):
    path = tmp_path / "run.sh"
    path.write_text("#!/bin/sh\ntrtllm-build --max_seq_len 4096 --output_dir e\ntrtllm-serve e --backend tensorrt\n")
    kinds = [p.kind for p in load_paths([path]).plans]
    assert kinds == ["trtllm-engine", "trtllm-serve-args"]


def test_a_flag_no_snapshot_has_is_information(tmp_path):
    report = run(tmp_path, "#!/bin/sh\ntrtllm-build --max_seq_len 4096 --max_inupt_len 1024 --use_fused_mlp enable\n")
    (finding,) = report.findings
    assert (finding.code, finding.severity.value, finding.location.line, finding.location.col) == ("SITS204", "info", 2, 33)
    assert finding.fix_hint == "did you mean --max_input_len?"
    assert "not checked" in finding.message


def test_what_runs_no_build():
    # the command after an operator is what is judged: `echo trtllm-build` builds nothing
    for text in ("true && echo trtllm-build --max_seq_len 8\n", "/bin/echo trtllm-build --max_seq_len 8\n"):
        assert plan_of(text)[1] is None, text
    _, plan = plan_of("python3 -m tensorrt_llm.commands.build")
    assert (plan.entry, plan.settings, plan.args_site) == ("python -m tensorrt_llm.commands.build", {}, None)
    _, plan = plan_of("python3 -m tensorrt_llm.commands.build --max_seq_len 8 --max_batch_size 2\n")
    assert [(k, s.value) for k, s in plan.settings.items()] == [
        ("build_config.max_seq_len", 8), ("build_config.max_batch_size", 2)]


def test_positional_words_are_skipped_and_the_anchor_is_the_last_word():
    doc, plan = plan_of("trtllm-build stray --max_seq_len 8 word --max_batch_size 2")
    assert [(k, s.value) for k, s in plan.settings.items()] == [
        ("build_config.max_seq_len", 8), ("build_config.max_batch_size", 2)]
    assert (plan.anchor.line, plan.anchor.col) == (1, doc.text.index(" 2") + 2)
    assert plan.unchecked == 0 and plan.env == {}


def test_variables_expand_from_the_environment_given():
    from sits_doctor.plan import Setting

    doc = parse_script("trtllm-build --max_seq_len $LEN --max_batch_size $N\n", "b.sh")
    tokens = _tokens(doc, doc.derived["shell-words"], 0)
    env = {"LEN": Setting(key="LEN", raw_key="LEN", value="4096", raw="4096")}
    plan = trtllm_build.plan_from_tokens(doc, tokens, label="b", anchor=tokens[0].prov, env=env)
    assert plan.get("build_config.max_seq_len").value == 4096 and plan.unchecked == 1
    assert plan.env == env
    kept = trtllm_build.plan_from_tokens(doc, tokens, label="b", anchor=tokens[0].prov, env=env, env_expands=False)
    assert kept.get("build_config.max_seq_len").templated and kept.unchecked == 0
