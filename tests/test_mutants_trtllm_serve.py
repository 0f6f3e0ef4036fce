"""trtllm-serve command lines (sits_doctor/loaders/trtllm_serve.py): edge cases that mutation
testing showed no test noticing — a program named by its path, a command that ends at ``-m``,
negative numbers as option values."""

from __future__ import annotations

import pytest

from sits_doctor.loaders import trtllm_serve
from sits_doctor.loaders.commands import split_shell
from sits_doctor.plan import Provenance
from sits_doctor.source_yaml import parse_yaml


def _plan(script: str):
    (doc,) = parse_yaml(f"script: {script}\n", "run.yaml")
    tokens = split_shell(doc, doc.data["script"], "/script")
    return trtllm_serve.plan_from_tokens(doc, tokens, label="run.yaml", anchor=Provenance.at(doc, "/script"))


@pytest.mark.parametrize("script", ["/bin/echo trtllm-serve m", "/usr/bin/pkill -f trtllm-serve",
                                    "python -m", "vllm serve m --tp -m"])
def test_commands_that_do_not_start_the_server(script):
    assert _plan(script) is None


def test_a_program_named_by_its_path_before_the_server_does_not_hide_it():
    plan = _plan("/bin/echo start; trtllm-serve m --port 9000")
    assert (plan.entry, plan.model_ref.value, plan.settings["port"].value) == ("trtllm-serve", "m", 9000)


def test_negative_numbers_are_option_values_not_flags():
    plan = _plan("trtllm-serve m --max_batch_size -1 --free_gpu_memory_fraction -0.5 --port -1e3")
    assert {k: (s.value, [w.text for w in s.site.words]) for k, s in plan.settings.items()} == {
        "max_batch_size": (-1, ["--max_batch_size", "-1"]),
        "kv_cache_config.free_gpu_memory_fraction": (-0.5, ["--free_gpu_memory_fraction", "-0.5"]),
        "port": ("-1e3", ["--port", "-1e3"]),  # click's int refuses it: kept as written
    }
    assert plan.model_ref.value == "m"


def test_the_module_as_the_last_word_still_starts_the_server():
    # click then refuses the missing MODEL; the command is still trtllm-serve's, with no model named
    plan = _plan("python3 -m tensorrt_llm.commands.serve")
    assert (plan.entry, plan.model_ref, plan.settings) == ("python -m tensorrt_llm.commands.serve", None, {})
