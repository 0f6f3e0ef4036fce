"""Launch scripts and Dockerfiles (sits_doctor/loaders/script.py): edge cases that mutation testing
showed no test noticing — which refusal message goes with which file, the shell form's words, the
variable a prefix sets, the last pip pin, comments and continuations, the legacy ``ENV`` form."""

from __future__ import annotations

from pathlib import Path

from sits_doctor.loaders import load_paths
from sits_doctor.loaders.script import dockerfile_plans, parse_dockerfile
from test_script_loader import plans_of


def test_each_refused_file_gets_its_own_reason(tmp_path: Path):
    (tmp_path / "build.sh").write_text("#!/bin/sh\nmake all\n")
    (tmp_path / "Dockerfile").write_text("FROM python:3.11\nCMD [\"python\", \"app.py\"]\n")
    for name, reason in (("build.sh", "(a shell script, but no command in it starts vLLM or trtllm-serve)"),
                         ("Dockerfile", "(a Dockerfile, but its command does not start vLLM or trtllm-serve)")):
        (err,) = load_paths([tmp_path / name]).errors
        assert err.message.startswith(f"not a recognized config {reason}"), name


def test_a_shell_form_command_is_its_words():
    doc = parse_dockerfile("FROM x\nENTRYPOINT vllm serve 'org/m' --max-model-len=4096\n", "Dockerfile")
    assert doc.data["ENTRYPOINT"] == ["vllm", "serve", "org/m", "--max-model-len=4096"]


def test_prefix_assignments_name_the_variable_and_its_value():
    (plan,) = plans_of("A=1 VLLM_LOGGING_LEVEL=DEBUG vllm serve m\n")
    assert {k: (v.key, v.value, str(v.prov)) for k, v in plan.env.items()} == {
        "A": ("A", "1", "serve.sh:1:1"), "VLLM_LOGGING_LEVEL": ("VLLM_LOGGING_LEVEL", "DEBUG", "serve.sh:1:5")}


def test_the_last_pip_pin_of_a_script_is_the_version():
    (plan,) = plans_of("pip install vllm==0.6.0\npip install vllm==0.8.5\nvllm serve m\n")
    assert (plan.pin.value, str(plan.pin.prov)) == ("0.8.5", "serve.sh:2:13")


def test_a_comment_ending_in_a_backslash_does_not_swallow_the_next_instruction():
    (plan,) = plans_of("FROM x\n# docker build -t me . \\\nCMD vllm serve m --max-model-len 100\n", "Dockerfile")
    assert (plan.label, plan.settings["max_model_len"].value) == ("Dockerfile line 3 (vllm serve)", 100)
    assert str(plan.settings["max_model_len"].prov) == "Dockerfile:3:18"


def test_a_file_ending_in_a_line_continuation_is_read():
    (plan,) = plans_of("FROM x\nCMD vllm serve m --max-model-len 100 \\", "Dockerfile")
    assert (plan.model_ref.value, plan.settings["max_model_len"].value) == ("m", 100)


def test_legacy_env_with_one_value_and_env_without_a_value():
    doc = parse_dockerfile("FROM x\nENV VLLM_USE_V1 1\nENV LONE\nCMD vllm serve m\n", "Dockerfile")
    assert doc.data["ENV"] == {"VLLM_USE_V1": "1"}  # `ENV LONE` (Docker refuses it) sets nothing
    (plan,) = dockerfile_plans(doc)
    assert {k: (v.value, str(v.prov)) for k, v in plan.env.items()} == {"VLLM_USE_V1": ("1", "Dockerfile:2:5")}


def test_a_command_without_a_from_line_is_still_read():
    (plan,) = plans_of("CMD vllm serve m --max-model-len 100\n", "Dockerfile")
    assert (plan.image, plan.label, plan.settings["max_model_len"].value) == (None, "Dockerfile line 1 (vllm serve)", 100)


def test_a_heredoc_body_is_not_read_as_instructions():
    (plan,) = plans_of("FROM x\nRUN <<EOF\n./setup.sh\nEOF\nCMD vllm serve m --max-model-len 100\n", "Dockerfile")
    assert (plan.label, str(plan.settings["max_model_len"].prov)) == ("Dockerfile line 5 (vllm serve)", "Dockerfile:5:18")


def test_a_shell_form_starting_with_a_test_bracket_is_not_json():
    doc = parse_dockerfile("FROM x\nCMD [ -d /models ] && vllm serve /models/m --max-model-len 100\n", "Dockerfile")
    assert doc.data["CMD"][:5] == ["[", "-d", "/models", "]", "&&"]
    (plan,) = dockerfile_plans(doc)
    assert (plan.model_ref.value, str(plan.settings["max_model_len"].prov)) == ("/models/m", "Dockerfile:2:44")


def test_a_legacy_env_value_may_hold_an_equals_sign():
    doc = parse_dockerfile("FROM x\nENV EXTRA_ARGS --max-model-len=4096\nCMD vllm serve m\n", "Dockerfile")
    assert doc.data["ENV"] == {"EXTRA_ARGS": "--max-model-len=4096"}


def test_a_dockerfile_with_neither_image_nor_command_is_refused(tmp_path: Path):
    (tmp_path / "Dockerfile").write_text("# base image set by CI\nARG BASE\n")
    (err,) = load_paths([tmp_path / "Dockerfile"]).errors
    assert err.message.startswith("not a recognized config (a Dockerfile, but its command does not start vLLM")


def test_a_command_without_arguments_is_anchored_at_its_first_word():
    (plan,) = plans_of("echo hi\nvllm serve\n")
    assert (plan.model_ref, str(plan.anchor)) == (None, "serve.sh:2:1")


def test_a_later_run_without_a_pin_keeps_the_pin():
    (plan,) = plans_of("FROM x\nRUN pip install vllm==0.8.5\nRUN echo done\nCMD vllm serve m\n", "Dockerfile")
    assert (plan.pin.value, str(plan.pin.prov)) == ("0.8.5", "Dockerfile:2:17")


def test_a_leading_blank_line_and_a_missing_final_newline():
    (plan,) = plans_of("\nFROM x\nCMD vllm serve m --max-model-len 100\n", "Dockerfile")
    assert (plan.label, str(plan.settings["max_model_len"].prov)) == ("Dockerfile line 3 (vllm serve)", "Dockerfile:3:18")
    (plan,) = plans_of("FROM x\nCMD vllm serve m --max-model-len 100", "Dockerfile")
    assert (plan.label, plan.settings["max_model_len"].value) == ("Dockerfile line 2 (vllm serve)", 100)
    (plan,) = plans_of("FROM x\nCMD vllm serve m \\\n    --max-model-len 100", "Dockerfile")  # a continued last line
    assert (plan.settings["max_model_len"].value, str(plan.settings["max_model_len"].prov)) == (100, "Dockerfile:3:5")
