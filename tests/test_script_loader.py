"""Launch scripts and Dockerfiles (sits_doctor/loaders/script.py): which commands become Plans,
how variables resolve, where every word sits, and that fixes edit exactly the flag."""

from __future__ import annotations

from pathlib import Path

import pytest

from sits_doctor.fixes import config as edit
from sits_doctor.fixer import apply_edits
from sits_doctor.loaders import load_paths, parse_docs
from sits_doctor.loaders.script import dockerfile_plans, is_dockerfile, is_script, parse_dockerfile, parse_script, script_plans


def plans_of(text: str, name: str = "serve.sh"):
    if is_dockerfile(name):
        return dockerfile_plans(parse_dockerfile(text, name))
    return script_plans(parse_script(text, name))


def test_names_and_shebangs():
    assert is_script("run.sh") and is_script("x/run.BASH") and not is_script("run.py")
    assert is_script("serve", "#!/bin/bash\nvllm serve m\n") and is_script("serve", "#!/usr/bin/env sh\n")
    assert not is_script("serve", "vllm serve m\n") and not is_script("serve.txt", "#!/bin/bash\n")
    assert not is_script("serve", "#!/usr/bin/env python3\n")
    assert all(is_dockerfile(n) for n in ("Dockerfile", "Containerfile", "Dockerfile.gpu", "serve.Dockerfile"))
    assert not is_dockerfile("Dockerfile-notes.md".replace("-notes.md", "_x")) and not is_dockerfile("dockerfile.txt")


def test_every_word_knows_where_it_is():
    text = "A=1 vllm serve 'org/m' --max-model-len=4096 # note\nvllm serve x\n"
    doc = parse_script(text, "s.sh")
    assert doc.data == ["A=1", "vllm", "serve", "org/m", "--max-model-len=4096", ";", "vllm", "serve", "x"]
    pos = doc.positions["/3"]
    assert (pos.line, pos.col, text[pos.start:pos.end], pos.style) == (1, 16, "'org/m'", "'")
    pos = doc.positions["/8"]
    assert (pos.line, pos.col, text[pos.start:pos.end]) == (2, 12, "x")


def test_each_command_that_starts_vllm_is_a_plan():
    text = ("echo start\n"
            "vllm serve a --max-model-len 1024 &\n"
            "python -m vllm.entrypoints.openai.api_server --model b --port 9000 && echo done\n"
            "pip install vllm\n")
    plans = plans_of(text)
    assert [(p.label, p.model_ref.value, p.entry) for p in plans] == [
        ("script line 2 (vllm serve)", "a", "vllm serve"),
        ("script line 3 (python -m vllm.entrypoints.openai.api_server)", "b",
         "python -m vllm.entrypoints.openai.api_server"),
    ]
    assert plans[0].settings["max_model_len"].value == 1024
    assert plans[1].settings["port"].value == 9000


def test_variables_resolve_as_the_shell_would():
    text = ("MODEL=org/m\n"
            "LEN=${LEN:-8192}\n"
            "TP=\"$GPUS\"\n"
            "export VLLM_LOGGING_LEVEL=DEBUG\n"
            "HIDDEN=1\n"
            "VLLM_USE_V1=1 vllm serve $MODEL --max-model-len ${LEN} -tp $TP --port ${PORT:-8000} --seed $SEED\n")
    (plan,) = plans_of(text)
    assert plan.model_ref.value == "org/m"
    s = plan.settings
    assert s["max_model_len"].value == 8192 and not s["max_model_len"].templated
    assert s["port"].value == 8000
    assert s["tensor_parallel_size"].templated and s["seed"].templated  # $GPUS and $SEED are never set
    assert plan.unchecked == 2
    # the engine's environment: exported and prefixed variables only
    assert {k: v.value for k, v in plan.env.items()} == {"VLLM_LOGGING_LEVEL": "DEBUG", "VLLM_USE_V1": "1"}
    # a resolved word keeps no span: a fix must not overwrite the reference with a number
    assert s["max_model_len"].site.words[-1].start == -1


def test_a_later_assignment_wins_and_earlier_commands_do_not_see_it():
    text = "vllm serve m --max-model-len $L\nL=2048\nvllm serve m --max-model-len $L\n"
    first, second = plans_of(text)
    assert first.settings["max_model_len"].templated and first.unchecked == 1
    assert second.settings["max_model_len"].value == 2048


def test_removing_a_flag_takes_its_line_and_keeps_the_continuations():
    text = ("vllm serve m \\\n"
            "  --swap-space 4 \\\n"
            "  --max-model-len 4096\n")
    (plan,) = plans_of(text)
    fix = edit.remove(plan.settings["swap_space"], "remove --swap-space")
    assert apply_edits(text, fix.edits) == "vllm serve m \\\n  --max-model-len 4096\n"
    fix = edit.remove(plan.settings["max_model_len"], "remove --max-model-len")
    assert apply_edits(text, fix.edits) == "vllm serve m \\\n  --swap-space 4\n"


@pytest.mark.parametrize("text, want", [
    # the only exported variable: the export goes with it
    ("export VLLM_ATTENTION_BACKEND=FLASHINFER\nvllm serve m\n", "vllm serve m\n"),
    # one of two: the export stays with the other
    ("export HF_HOME=/models VLLM_ATTENTION_BACKEND=FLASHINFER\nvllm serve m\n",
     "export HF_HOME=/models\nvllm serve m\n"),
])
def test_exported_variable_is_removed_with_its_export(text, want):
    (plan,) = plans_of(text)
    fix = edit.remove(plan.env["VLLM_ATTENTION_BACKEND"], "remove it")
    assert apply_edits(text, fix.edits) == want


def test_dockerfile_exec_form_items_sit_where_written():
    text = ('FROM vllm/vllm-openai:v0.10.2 AS serve\n'
            'ENV HF_HOME=/models VLLM_USE_V1="1"\n'
            'CMD ["m", "--swap-space", "4", \\\n'
            '     "--max-model-len", "8192"]\n')
    doc = parse_dockerfile(text, "Dockerfile")
    assert doc.data == {"FROM": "vllm/vllm-openai:v0.10.2", "ENV": {"HF_HOME": "/models", "VLLM_USE_V1": "1"},
                        "CMD": ["m", "--swap-space", "4", "--max-model-len", "8192"]}
    pos = doc.positions["/CMD/3"]
    assert (pos.line, pos.col, text[pos.start:pos.end]) == (4, 6, '"--max-model-len"')
    (plan,) = dockerfile_plans(doc)
    assert plan.image.value == "vllm/vllm-openai:v0.10.2" and plan.entry == "vllm image entrypoint"
    assert plan.model_ref.value == "m" and plan.settings["max_model_len"].value == 8192
    assert {k: v.value for k, v in plan.env.items()} == {"HF_HOME": "/models", "VLLM_USE_V1": "1"}
    fix = edit.remove(plan.settings["swap_space"], "remove --swap-space")
    assert apply_edits(text, fix.edits) == text.replace(' "--swap-space", "4",', "")


def test_dockerfile_shell_form_entrypoint_and_stage_rules():
    text = ("FROM vllm/vllm-openai:v0.9.0\n"
            'CMD ["old-stage-model"]\n'
            "FROM python:3.12-slim\n"
            "RUN pip install vllm\n"
            "ENV MAX=4096\n"
            "ENTRYPOINT vllm serve org/m \\\n"
            "    --max-model-len $MAX --swap-space 2\n")
    (plan,) = plans_of(text, "Dockerfile")
    assert plan.image.value == "python:3.12-slim"  # the last stage is the image that runs
    assert plan.model_ref.value == "org/m" and plan.settings["max_model_len"].value == 4096
    fix = edit.remove(plan.settings["swap_space"], "remove --swap-space")
    assert apply_edits(text, fix.edits).endswith("    --max-model-len $MAX\n")


def test_dockerfile_skips_comment_and_empty_lines_inside_a_continued_instruction():
    # Docker's parser drops them and keeps reading the instruction (moby/buildkit
    # frontend/dockerfile/parser: comments and empty continuation lines are skipped).
    text = ("FROM vllm/vllm-openai:v0.11.0\n"
            "CMD vllm serve org/m \\\n"
            "    # the old scheduler\n"
            "    --num-scheduler-steps 8 \\\n"
            "\n"
            "    --max-model-len 8192\n"
            "ENV AFTER=1\n")
    (plan,) = plans_of(text, "Dockerfile")
    assert plan.settings["max_model_len"].value == 8192
    steps = plan.settings["num_scheduler_steps"]
    assert (steps.prov.line, steps.prov.col) == (4, 5)
    assert {k: v.value for k, v in plan.env.items()} == {"AFTER": "1"}
    fix = edit.remove(steps, "remove --num-scheduler-steps")
    assert apply_edits(text, fix.edits) == text.replace("    --num-scheduler-steps 8 \\\n", "")
    # a comment in the first column is skipped the same way
    (plan,) = plans_of(text.replace("    # the old scheduler", "#the old scheduler"), "Dockerfile")
    assert plan.settings["max_model_len"].value == 8192
    # without the continuation the comment ends nothing: the next line is not part of CMD
    (plan,) = plans_of(text.replace("org/m \\\n", "org/m\n"), "Dockerfile")
    assert "max_model_len" not in plan.settings


def test_dockerfile_exec_form_joins_continuations_first_even_inside_an_item():
    # Docker removes "\\" + newline (blanks allowed after the backslash) before parsing the JSON
    text = ('FROM vllm/vllm-openai:v0.11.0\n'
            'CMD ["org/m", "--swap-space", "4", \\  \n'
            '     "--max-model-len", "81\\\n'
            '92"]\n')
    doc = parse_dockerfile(text, "Dockerfile")
    assert doc.data["CMD"] == ["org/m", "--swap-space", "4", "--max-model-len", "8192"]
    pos = doc.positions["/CMD/4"]
    assert (pos.line, pos.col, text[pos.start:pos.end]) == (3, 25, '"81\\\n92"')
    (plan,) = dockerfile_plans(doc)
    assert plan.settings["max_model_len"].value == 8192
    fix = edit.remove(plan.settings["swap_space"], "remove --swap-space")
    assert apply_edits(text, fix.edits) == text.replace(' "--swap-space", "4",', "")


def test_entrypoint_resets_an_earlier_cmd():
    text = 'FROM ubuntu\nCMD ["--max-model-len", "1"]\nENTRYPOINT ["vllm", "serve", "m"]\n'
    (plan,) = plans_of(text, "Dockerfile")
    assert "max_model_len" not in plan.settings


def test_legacy_env_form_and_no_vllm():
    doc = parse_dockerfile("FROM python:3.11\nENV GREETING hello world\nCMD [\"python\", \"app.py\"]\n", "Dockerfile")
    assert doc.data["ENV"] == {"GREETING": "hello world"}
    assert dockerfile_plans(doc) == []


def test_unrecognized_scripts_say_what_they_are(tmp_path: Path):
    (tmp_path / "build.sh").write_text("#!/bin/sh\nmake all\n")
    (tmp_path / "Dockerfile").write_text("FROM python:3.11\nCMD [\"python\", \"app.py\"]\n")
    result = load_paths([tmp_path / "build.sh", tmp_path / "Dockerfile"])
    messages = sorted(e.message for e in result.errors)
    assert messages[0].startswith("not a recognized config (a Dockerfile, but its command does not start vLLM")
    assert messages[1].startswith("not a recognized config (a shell script, but no command in it starts vLLM")
    walked = load_paths([tmp_path])  # in a walk they are skipped, not errors
    assert walked.errors == [] and walked.skipped == 2


@pytest.mark.parametrize("name", ["serve.sh", "Dockerfile"])
def test_fixed_text_parses_again(name):
    text = "FROM vllm/vllm-openai:v0.8.5\nCMD [\"m\"]\n" if name == "Dockerfile" else "vllm serve m\n"
    (doc,) = parse_docs(text, Path(name), name)
    assert doc.fmt == ("dockerfile" if name == "Dockerfile" else "shell")


def test_a_new_stage_forgets_the_last_stages_entrypoint():
    text = 'FROM ubuntu AS build\nENTRYPOINT ["sleep"]\nFROM vllm/vllm-openai:v0.9.0\nCMD ["m", "--max-model-len", "2048"]\n'
    (plan,) = plans_of(text, "Dockerfile")
    assert plan.entry == "vllm image entrypoint" and plan.settings["max_model_len"].value == 2048


def test_a_pip_pin_in_the_file_sets_the_version(tmp_path: Path):
    from sits_doctor.engine import check

    (tmp_path / "Dockerfile").write_text(
        "FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04\n"
        "RUN pip install --no-cache-dir vllm==0.6.3.post1 'ray[serve]'\n"
        "ENTRYPOINT vllm serve org/m --num-scheduler-steps 8\n")
    (tmp_path / "run.sh").write_text("uv pip install vllm==0.11.0\nvllm serve org/m --num-scheduler-steps 8\n")
    report = check([tmp_path], None)
    targets = sorted((p.file.rsplit("/", 1)[-1], p.target.version, p.target.source.split(" (")[0]) for p in report.deployments)
    assert targets == [("Dockerfile", "0.6.3.post1", "pip install vllm==0.6.3.post1"),
                       ("run.sh", "0.11.0", "pip install vllm==0.11.0")]
    # 0.6.3.post1 still had multi-step scheduling; 0.11.0 did not
    assert [f.location.file.rsplit("/", 1)[-1] for f in report.findings if f.code == "SITS204"] == ["run.sh"]


def test_pins_that_are_not_the_package():
    from sits_doctor.loaders.script import pip_pin

    doc = parse_script("pip install vllm-flash-attn==2.6.1 my-vllm==1.0\npip install vllm\n", "s.sh")
    assert pip_pin(doc, doc.text, 0, "") is None
    doc = parse_script("pip install tensorrt_llm==0.17.0 --extra-index-url https://pypi.nvidia.com\n", "s.sh")
    pin = pip_pin(doc, doc.text, 0, "")
    assert (pin.key, pin.value, pin.prov.line, pin.prov.col) == ("trtllm", "0.17.0", 1, 13)


def test_an_unrecognized_mapping_says_what_it_looked_closest_to(tmp_path: Path):
    (tmp_path / "near.yaml").write_text("model: org/m\nport: 8000\nname: x\nreplicas: 3\nowner: me\n")
    (tmp_path / "far.yaml").write_text("a: 1\n")
    near, far = load_paths([tmp_path / "near.yaml", tmp_path / "far.yaml"]).errors
    assert near.message.startswith("not a recognized config (closest to a vLLM --config file: 2 of its 5 top-level "
                                   "keys are vLLM options (model, port)")
    assert far.message.startswith("not a recognized config; expected")


def test_exec_form_strings_keep_no_state_per_character():
    """A Dockerfile CMD of one long JSON string: the item scanner holds no backtracking state per
    character (the alternation it replaced peaked at about 140 bytes a character; an escape still costs one group)."""
    import random
    import re
    import tracemalloc

    from sits_doctor.loaders.script import _JSON_STRING

    reference = re.compile(r'"(?:[^"\\\n]|\\.)*"')  # what it finds: the plain JSON string pattern
    rng = random.Random(7)
    for _ in range(3000):
        s = "".join(rng.choice('ab"\\\n x') for _ in range(rng.randint(0, 16)))
        assert [m.span() for m in _JSON_STRING.finditer(s)] == [m.span() for m in reference.finditer(s)], repr(s)
    big = '"' + ("a" * 100_000 + "\\\"") * 20 + '"'  # long runs of plain characters, a few escapes
    tracemalloc.start()
    assert _JSON_STRING.fullmatch(big)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < len(big) // 4, peak
