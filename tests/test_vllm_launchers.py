"""Issue 26 "Truth on real configs", the vLLM launcher cases: fixes valid at the releases in
play, pins written plainly, shell defaults, and the launchers that were not read. Each test is
built from a small file like the public one where the wrong answer was found."""

from __future__ import annotations

import pytest

from conftest import run_cli, write

from sits_doctor.finding import Safety


def _check(tmp_path, name, text, *args):
    write(tmp_path, name, text)
    return run_cli("check", name, "--isolated", "--fail-on", "info", *args, cwd=tmp_path)


def _fixes(tmp_path, name, text, *args):
    from sits_doctor.engine import CheckOptions, check

    path = write(tmp_path, name, text)
    opts = CheckOptions(isolated=True, **dict(args))
    return [fx for f in check([str(path)], opts).findings for fx in f.fixes]


# --- 1. a fix's new flag is checked against the releases in play ------------------------------

CHUNKED = "#!/bin/bash\nvllm serve Qwen/Qwen2.5-7B-Instruct --enable-chunked-prefill=false --port 8000\n"


def test_fix_writes_the_spelling_every_release_from_085_reads(tmp_path, hermetic):
    (fix,) = _fixes(tmp_path, "serve.sh", CHUNKED, ("targets", ("vllm==0.33.0",)))
    (e,) = fix.edits
    assert e.new == "--no-enable-chunked-prefill"  # not --disable-chunked-prefill (0.33.0 only)
    assert fix.safety is Safety.SAFE  # pinned: the one release in play accepts it


def test_fix_without_a_pin_is_unsafe_and_says_why(tmp_path, hermetic):
    (fix,) = _fixes(tmp_path, "serve.sh", CHUNKED)
    assert fix.safety is Safety.UNSAFE
    from sits_doctor.frameworks.vllm import NEWEST

    assert "no version pin" in fix.title and f"parses on vLLM 0.8.5 … {NEWEST}" in fix.title
    r = run_cli("fix", "serve.sh", "--isolated", cwd=tmp_path)  # safe fixes only: nothing changes
    assert "+vllm serve" not in r.stdout


def test_value_after_flag_is_valid_where_the_parser_was_store_boolean(tmp_path, hermetic):
    r = _check(tmp_path, "serve.sh", CHUNKED, "--target", "vllm==0.8.3")
    assert "SITS201" not in r.stdout  # StoreBoolean, nargs="?": =false parses


def test_checked_refuses_a_flag_the_judged_release_lacks():
    from sits_doctor.finding import Edit, Fix
    from sits_doctor.fixes.config_versions import checked, portable
    from sits_doctor.plan import Target

    fix = Fix("write --disable-chunked-prefill", "f", (Edit(0, 1, "--disable-chunked-prefill"),), Safety.SAFE)
    at_032 = checked(fix, ["--disable-chunked-prefill"], Target("vllm", "0.32.0", "t"))
    assert at_032.safety is Safety.DISPLAY and not at_032.edits and "0.32.0 does not accept" in at_032.why_not
    assert checked(fix, ["--disable-chunked-prefill"], Target("vllm", "0.33.0", "t")) is fix
    assert checked(fix, ["--x"], Target("trtllm", "1.0.0", "t")) is fix
    assert portable(["--disable-chunked-prefill", "--no-enable-chunked-prefill"], "0.33.0") == "--no-enable-chunked-prefill"
    assert portable(["--disable-chunked-prefill"], "0.32.0") is None


# --- 2. pins written plainly ------------------------------------------------------------------

COMPOSE = """services:
  vllm:
    image: ${VLLM_IMAGE:-vllm/vllm-openai:v0.6.6}
    command: ["--model", "Qwen/Qwen2.5-7B-Instruct", "--swap-space", "8"]
"""


def test_compose_image_default_is_the_pin(tmp_path, hermetic):
    r = _check(tmp_path, "docker-compose.yaml", COMPOSE)
    assert "target: vLLM 0.6.6 (image vllm/vllm-openai:v0.6.6, the default of ${VLLM_IMAGE:-" in r.stdout
    assert "VLLM_IMAGE is not set in the file" in r.stdout and "SITS204" not in r.stdout


def test_skypilot_image_id_is_the_pin(tmp_path, hermetic):
    text = ("resources:\n  accelerators: L4:1\n  image_id: docker:vllm/vllm-openai:v0.10.0\n"
            "run: |\n  vllm serve Qwen/Qwen2.5-7B-Instruct --swap-space 8\n")
    r = _check(tmp_path, "task.yaml", text)
    assert "target: vLLM 0.10.0 (image vllm/vllm-openai:v0.10.0" in r.stdout and "SITS204" not in r.stdout


@pytest.mark.parametrize("where", ["script", "skypilot-run"])
def test_pip_pin_is_read_in_pep440_normal_form(tmp_path, hermetic, where):
    cmd = "pip install vllm==0.5.3post1 && vllm serve Qwen/Qwen2.5-7B-Instruct --swap-space 8"
    if where == "script":
        r = _check(tmp_path, "serve.sh", f"#!/bin/bash\n{cmd}\n")
    else:
        r = _check(tmp_path, "task.yaml", f"resources:\n  accelerators: L4:1\nrun: |\n  {cmd}\n")
    assert "target: vLLM 0.5.3.post1 (pip install vllm==0.5.3post1 (PEP 440: 0.5.3.post1)" in r.stdout


def test_mirrored_official_image_is_taken_as_that_release(tmp_path, hermetic):
    from sits_doctor.versions import version_from_image

    assert version_from_image("registry.example.com/mirror/vllm/vllm-openai:v0.9.2") == ("vllm", "0.9.2")
    assert version_from_image("lmcache/vllm-openai:v0.3.14") is None
    assert version_from_image("example.com/team/vllm-openai:v0.9.2") is None
    assert version_from_image("vllm/vllm-openai:v0.5.3post1") == ("vllm", "0.5.3.post1")
    text = ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: vllm\n"
            "    image: registry.example.com/mirror/vllm/vllm-openai:v0.9.2\n    args: [--model, m, --swap-space, '8']\n")
    r = _check(tmp_path, "pod.yaml", text)
    assert "a mirror of vLLM's own vllm/vllm-openai:v0.9.2, taken as that release" in r.stdout


# --- 6. shell default expansions ---------------------------------------------------------------

TP_SCRIPT = """#!/bin/bash
MODEL="${1:-meta-llama/Llama-3.1-8B-Instruct}"
TP="${2:-2}"
vllm serve "$MODEL" --tensor-parallel-size "$TP" --max-model-len 8192
"""


def test_capacity_takes_a_positional_default_and_says_so(tmp_path, hermetic):
    write(tmp_path, "serve.sh", TP_SCRIPT)
    r = run_cli("capacity", "serve.sh", "--gpu", "H100", "--isolated", cwd=tmp_path)
    assert r.exit_code in (0, 1), r.stderr
    assert "tensor_parallel_size 2: $TP: ${2:-2} is its default '2' (argument 2 of the script is not set in the file)" in r.stdout
    assert "meta-llama/Llama-3.1-8B-Instruct" in r.stdout


@pytest.mark.parametrize("value", ['"$NTP"', "two", '"${2}"'])
def test_capacity_of_an_unresolved_tp_is_not_checked(tmp_path, hermetic, value):
    write(tmp_path, "serve.sh", f"#!/bin/bash\nvllm serve m --tensor-parallel-size {value}\n")
    r = run_cli("capacity", "serve.sh", "--gpu", "H100", "--isolated", cwd=tmp_path)
    assert r.exit_code in (0, 1), r.stderr
    assert "--tensor-parallel-size" in r.stdout and "not checked" in r.stdout
    assert r.stdout.count("not checked") == 1  # once, not once per way of seeing it


def test_default_expansions():
    from sits_doctor.loaders.vllm_args import Token, is_shell_templated, resolve_vars
    from sits_doctor.plan import Provenance, Setting

    assert is_shell_templated("${2:-2}") and is_shell_templated("$1") and is_shell_templated("$@")
    set_ = Setting(key="A", raw_key="A", value="x", raw="x", prov=Provenance())
    secret = set_.with_(value=None, templated=True)

    def one(text, env):
        (tok,), unknown = resolve_vars([Token(text, Provenance(), True)], env)
        return tok.text, unknown, tok.prov.note

    assert one("${2:-2}", {}) == ("2", 0, "${2:-2} is its default '2' (argument 2 of the script is not set in the file)")
    assert one("${A-d}", {})[:2] == ("d", 0) and one("${A:=d}", {})[:2] == ("d", 0)
    assert one("${A:-d}", {"A": set_})[:2] == ("x", 0)
    assert one("${A:-d}", {"A": secret})[1] == 1  # set to something the file does not know
    assert one("${A:+alt}", {})[1] == 1 and one("$1", {})[1] == 1


# --- 4. YAML with Jinja text, shells that take their script after --, docker run, heredocs -----

CHAT_TEMPLATE_CM = """apiVersion: v1
kind: ConfigMap
metadata: {name: chat-template}
data:
  template.jinja: |
    {{- bos_token }}
    {%- for message in messages %}
        {{- message['content'] | trim }}
    {%- endfor %}
---
apiVersion: v1
kind: Service
metadata: {name: vllm}
"""


def test_valid_yaml_with_a_jinja_block_scalar_keeps_every_document():
    from sits_doctor.source_yaml import parse_yaml

    docs = parse_yaml(CHAT_TEMPLATE_CM, "cm.yaml")
    assert [d.data["kind"] for d in docs] == ["ConfigMap", "Service"]
    body = docs[0].data["data"]["template.jinja"]
    # masked in place: the lines and their indentation stay, so the scalar keeps its extent
    assert body.splitlines() == ["__tp" + "_" * 12, "{%- for message in messages %}", "    __tp" + "_" * 28,
                                 "{%- endfor %}"]
    assert docs[0].pos("/data/template.jinja").line == 5 and "/data/template.jinja" in docs[0].templated


def test_valid_yaml_that_neutralising_would_break_is_read_as_written():
    from sits_doctor.source_yaml import parse_yaml

    (doc,) = parse_yaml('a: "{{"\nb: x }}\n', "q.yaml")  # one "action" across two entries
    assert doc.data == {"a": "{{", "b": "x }}"} and doc.templated == {"/a"}


def test_shell_script_after_double_dash_is_read():
    from sits_doctor.loaders.commands import _script_at

    assert _script_at(["/bin/bash", "-lc", "--", "vllm serve m"]) == 3
    assert _script_at(["bash", "-l", "-c", "vllm serve m"]) == 3
    assert _script_at(["sh", "-c", "vllm serve m"]) == 2
    assert _script_at(["bash", "-l", "run.sh"]) == -1 and _script_at(["vllm", "serve", "m"]) == -1


DOCKER_RUN = """#!/bin/bash
docker run --gpus all --ipc=host -p 8000:8000 -it \\
  -v ~/.cache/huggingface:/root/.cache/huggingface -e HF_TOKEN="$HF_TOKEN" --name vllm \\
  vllm/vllm-openai:v0.10.2 \\
  --model Qwen/Qwen2.5-7B-Instruct --enable-chunked-prefill=false --swap-space 8
"""


def test_docker_run_reads_the_args_after_the_image(tmp_path, hermetic):
    r = _check(tmp_path, "serve.sh", DOCKER_RUN)
    assert "target: vLLM 0.10.2 (image vllm/vllm-openai:v0.10.2 (serve.sh:4:3))" in r.stdout
    assert "serve.sh:5:36: SITS201" in r.stdout and "SITS204" not in r.stdout  # --swap-space: still there
    assert "not checked" not in r.stderr  # $HF_TOKEN is docker's -e, not a server word
    from sits_doctor.loaders import load_paths

    (plan,) = load_paths([tmp_path / "serve.sh"]).plans
    assert plan.model_ref.value == "Qwen/Qwen2.5-7B-Instruct" and set(plan.env) == {"HF_TOKEN"}
    assert plan.label == "script line 2 (vllm image entrypoint)"


def test_docker_run_entrypoint_is_the_command(tmp_path, hermetic):
    from sits_doctor.loaders import load_paths

    text = ("#!/bin/bash\nIMG=nvcr.io/nvidia/tensorrt-llm/release:1.0.0rc4\nMODEL=meta-llama/Llama-3.1-8B-Instruct\n"
            'sudo docker run --rm --gpus all --ipc host --entrypoint trtllm-serve "$IMG" serve "$MODEL" --max_batch_size 64\n')
    write(tmp_path, "trt.sh", text)
    (plan,) = load_paths([tmp_path / "trt.sh"]).plans
    assert plan.framework == "trtllm" and plan.model_ref.value == "meta-llama/Llama-3.1-8B-Instruct"
    assert plan.image.value == "nvcr.io/nvidia/tensorrt-llm/release:1.0.0rc4"
    r = run_cli("check", "trt.sh", "--isolated", cwd=tmp_path)
    assert "target: TensorRT-LLM 1.0.0rc4 (image nvcr.io/nvidia/tensorrt-llm/release:1.0.0rc4" in r.stdout


def test_docker_run_options():
    from sits_doctor.loaders.script import docker_run, parse_script, _tokens

    def run(line):
        doc = parse_script(line, "s.sh")
        found = docker_run(doc, _tokens(doc, doc.derived["shell-words"], 0))
        return None if found is None else ([w.text for w in found[0]], found[1].value, sorted(found[2]), found[3])

    assert run("docker run -d --shm-size=16g -e A=1 --env B img:1 --x") == (["--x"], "img:1", ["A", "B"], False)
    assert run("podman container run -dp 80:80 img") == ([], "img", [], False)
    assert run("docker run --entrypoint=python img -m x") == (["python", "-m", "x"], "img", [], True)
    assert run("docker pull img") is None and run("docker run --rm") is None and run("echo docker run x") is None


HEREDOC = """#!/bin/bash
MODEL=Qwen/Qwen2.5-7B-Instruct
cat > /tmp/vllm.yaml <<EOF
model: $MODEL
swap-space: 8
enable-chunked-prefill: "false"
EOF
vllm serve --config /tmp/vllm.yaml --port 8000
"""


def test_heredoc_config_is_checked_where_it_is_written(tmp_path, hermetic):
    r = _check(tmp_path, "serve.sh", HEREDOC)
    assert "serve.sh:5:1: SITS204 [error] --swap-space was removed" in r.stdout
    assert "serve.sh:6:1: SITS201 [error] `enable-chunked-prefill: 'false'` is a string" in r.stdout
    r = run_cli("fix", "serve.sh", "--isolated", "--apply", cwd=tmp_path)
    assert (tmp_path / "serve.sh").read_text() == HEREDOC.replace('swap-space: 8\n', "").replace('"false"', "false")


def test_heredoc_bodies_are_not_words():
    from sits_doctor.loaders import shell

    heredocs: list = []
    text = "cat <<-'X' | tee a.yaml\n\tvllm serve m\n\tX\nvllm serve n\ncat <<< 'x'\n"
    words = shell.split(text, heredocs)
    assert [w.text for w in words] == ["cat", "<<-", "X", "|", "tee", "a.yaml", ";", "vllm", "serve", "n", ";", "cat", "<<<",
                                       "x"]
    (h,) = heredocs
    assert (text[h.start:h.end], h.expands, h.word) == ("\tvllm serve m\n", False, 1)
    from sits_doctor.loaders.script import _heredoc_target

    assert _heredoc_target(words, 1) == "a.yaml"
    assert _heredoc_target(shell.split("cat <<EOF >out.yaml\nEOF\n"), 1) == "out.yaml"
    assert _heredoc_target(shell.split("cat <<EOF\nEOF\n"), 1) is None


# --- 5. launchers that were refused ------------------------------------------------------------

def test_dockerfile_running_a_script_beside_it(tmp_path, hermetic):
    write(tmp_path, "Dockerfile", 'FROM vllm/vllm-openai:v0.10.2\nENV MAX_LEN=8192\nCOPY run.sh /opt/start.sh\n'
                                  'ENTRYPOINT ["/bin/bash", "/opt/start.sh"]\nCMD ["Qwen/Qwen2.5-7B-Instruct"]\n')
    write(tmp_path, "run.sh", '#!/bin/bash\nexec vllm serve "$1" --max-model-len "$MAX_LEN" --swap-space 8 '
                              '--enable-chunked-prefill=false\n')
    for given in ("Dockerfile", "."):  # named, and in a walk (where run.sh is not checked twice)
        r = run_cli("check", given, "--isolated", "--fail-on", "info", cwd=tmp_path)
        assert r.stdout.count("run.sh:2:") == 1, r.stdout
        assert "target: vLLM 0.10.2 (image vllm/vllm-openai:v0.10.2 (Dockerfile:1:6))" in r.stdout
        assert "SITS204" not in r.stdout
    from sits_doctor.loaders import load_paths

    (plan,) = load_paths([tmp_path / "Dockerfile"]).plans
    assert plan.model_ref.value == "Qwen/Qwen2.5-7B-Instruct" and plan.value("max_model_len") == 8192
    assert plan.label.startswith("script line 2 (vllm serve) (run by ") and plan.label.endswith("Dockerfile)")


def test_dockerfile_script_lookup(tmp_path):
    from sits_doctor.loaders.script import launched_script, parse_dockerfile

    write(tmp_path, "start.sh", "#!/bin/sh\nvllm serve m\n")
    write(tmp_path, "scripts/serve", "#!/bin/bash\nvllm serve m\n")

    def found(text):
        got = launched_script(parse_dockerfile(text, "Dockerfile"), str(tmp_path))
        return None if got is None else (got[0][len(str(tmp_path)) + 1:], [t.text for t in got[1]])

    assert found('FROM x\nCMD ["./start.sh", "a"]\n') == ("start.sh", ["a"])
    assert found("FROM x\nCOPY scripts/serve /usr/bin/serve\nCMD serve\n") == ("scripts/serve", [])
    assert found("FROM x\nCOPY . /app\nENTRYPOINT [\"sh\", \"-c\", \"/app/start.sh\"]\n") == ("start.sh", [])
    assert found('FROM x\nCMD ["python", "app.py"]\n') is None and found("FROM x\n") is None


def test_rayservice_reads_its_containers_as_well(tmp_path, hermetic):
    text = """apiVersion: ray.io/v1
kind: RayService
metadata: {name: vllm}
spec:
  serveConfigV2: |
    applications:
      - name: llm
        args: {llm_configs: [./models/qwen.yaml]}
  rayClusterConfig:
    headGroupSpec:
      template:
        spec:
          containers:
            - name: ray-head
              image: vllm/vllm-openai:v0.33.0
              command: ["/bin/bash", "-lc", "--"]
              args: ["ray start --head --block & vllm serve m --swap-space 8"]
"""
    r = _check(tmp_path, "rayservice.yaml", text)
    assert "rayservice.yaml:17:63: SITS204 [error] --swap-space was removed" in r.stdout


def test_rayjob_entrypoint_runs_in_the_head_image(tmp_path, hermetic):
    text = """apiVersion: ray.io/v1
kind: RayJob
metadata: {name: j}
spec:
  entrypoint: vllm serve m --swap-space 8
  rayClusterSpec:
    headGroupSpec:
      template:
        spec:
          containers: [{name: head, image: "vllm/vllm-openai:v0.10.2"}]
    workerGroupSpecs:
      - template:
          spec:
            containers: [{name: w, image: "vllm/vllm-openai:v0.33.0"}]
"""
    r = _check(tmp_path, "job.yaml", text)
    assert "target: vLLM 0.10.2 (image vllm/vllm-openai:v0.10.2" in r.stdout and "SITS204" not in r.stdout


# --- 3. KAITO: the server parser's optional positional takes one stray word ---------------------

KAITO_CM = """apiVersion: v1
kind: ConfigMap
metadata: {{name: params}}
data:
  inference_config.yaml: |
    vllm:
      max-model-len: 8192
      enable-chunked-prefill: {first}
      tensor-parallel-size: 1
{more}"""


def _kaito(tmp_path, target, first="true", more=""):
    from sits_doctor.engine import CheckOptions, check

    path = write(tmp_path, "cm.yaml", KAITO_CM.format(first=first, more=more))
    report = check([str(path)], CheckOptions(isolated=True, targets=[target], select=["SITS201"]))
    return sorted((f.location.line, f.severity.value, f.message.split(":")[0]) for f in report.findings)


def test_kaito_first_stray_true_is_taken_by_model_tag(tmp_path, hermetic):
    assert _kaito(tmp_path, "vllm==0.10.0") == [
        (8, "info", "--enable-chunked-prefill takes no value; the stray word 'True' lands in model_tag")]
    assert [s for _, s, _ in _kaito(tmp_path, "vllm==0.9.2")] == ["error"]  # no model_tag before 0.10.0


def test_kaito_second_stray_word_fails_and_false_leaves_the_flag_on(tmp_path, hermetic):
    got = _kaito(tmp_path, "vllm==0.33.0", more="      enforce-eager: true\n")
    assert [(line, sev) for line, sev, _ in got] == [(8, "info"), (10, "error")]
    ((_, sev, message),) = _kaito(tmp_path, "vllm==0.33.0", first="false")
    assert sev == "warning"


def test_vllm_serve_reads_model_tag_as_the_model(tmp_path, hermetic):
    r = _check(tmp_path, "serve.sh", "#!/bin/bash\nvllm serve m --enforce-eager True\n", "--target", "vllm==0.33.0")
    assert "SITS201 [error]" in r.stdout  # vllm serve: m is model_tag; True is one word too many
    r = _check(tmp_path, "api.sh", "#!/bin/bash\npython -m vllm.entrypoints.openai.api_server m --enforce-eager True\n",
               "--target", "vllm==0.33.0")
    assert "SITS201 [error]" in r.stdout  # the positional m already fills model_tag


# --- 7. a variable word after a flag that takes none --------------------------------------------

@pytest.mark.parametrize("assignment", ['EAGER="$3"', 'if [ -n "$X" ]; then\n  EAGER=$(cat /etc/eager)\nfi'])
def test_variable_after_a_flag_that_takes_none_is_named_where_it_is_set(tmp_path, hermetic, assignment):
    text = f"#!/bin/bash\n{assignment}\nvllm serve Qwen/Qwen2.5-7B-Instruct --enforce-eager $EAGER --port 8000\n"
    r = _check(tmp_path, "serve.sh", text, "--target", "vllm==0.33.0")
    assert "SITS201 [warning] --enforce-eager takes no value, and $EAGER after it is a separate word: where it " \
           "expands to one, vLLM 0.33.0 refuses to start" in r.stdout
    assert "= why: $EAGER is set in this file: line " in r.stdout
    chunked = text.replace("--enforce-eager", "--enable-chunked-prefill")
    assert "SITS201" not in _check(tmp_path, "old.sh", chunked, "--target", "vllm==0.8.4").stdout  # StoreBoolean reads it


def test_variable_after_a_flag_not_set_in_the_file_is_not_judged(tmp_path, hermetic):
    from sits_doctor.loaders import load_paths

    text = "#!/bin/bash\nvllm serve --model m --enforce-eager $EAGER\n"
    r = _check(tmp_path, "serve.sh", text, "--target", "vllm==0.33.0")
    assert "SITS201" not in r.stdout and "not checked" in r.stderr
    (plan,) = load_paths([tmp_path / "serve.sh"]).plans
    assert plan.model_ref.value == "m" and plan.value("enforce_eager") is True  # $EAGER is not the model


def test_checked_counts_releases_and_knows_no_parser_before_the_data():
    from sits_doctor.finding import Edit, Fix
    from sits_doctor.fixes.config_versions import _releases_accepting, accepted_by, checked
    from sits_doctor.frameworks import vllm as fw
    from sits_doctor.plan import Target

    releases = fw.parser_table()[0]
    assert _releases_accepting("--no-enable-chunked-prefill") == len(releases) - releases.index("0.8.5")
    since = releases.index("0.33.0")  # the spelling --disable-chunked-prefill arrived in 0.33.0
    assert _releases_accepting("--disable-chunked-prefill") == len(releases) - since
    assert _releases_accepting("--no-such-flag") == 0
    newer = "0.33.0" if since == len(releases) - 1 else f"0.33.0 … {releases[-1]}"
    assert accepted_by("--disable-chunked-prefill") == newer and accepted_by("--no-such-flag") == "no release"
    fix = Fix("write --x", "f", (Edit(0, 1, "--x"),), Safety.SAFE)
    old = checked(fix, ["--no-enable-chunked-prefill"], Target("vllm", "0.5.3.post1", "t"))
    assert old.safety is Safety.DISPLAY and not old.edits and old.why_not.startswith("no parser data for vLLM 0.5.3.post1")


def test_launcher_edge_cases(tmp_path):
    from sits_doctor.loaders import shell
    from sits_doctor.loaders.script import _assignments, _tokens, launched_script, parse_dockerfile, parse_script
    from sits_doctor.versions import rehosted_official

    def opened(text):
        found: list = []
        shell.split(text, found)
        return [(h.delimiter, h.expands) for h in found]

    assert opened("cat <<EOF\nx\nEOF\n") == [("EOF", True)]
    assert opened("cat <<'EOF'\nx\nEOF\n") == [("EOF", False)] == opened('cat <<"EOF"\nx\nEOF\n')
    assert opened("cat <<\\EOF\nx\nEOF\n") == [("EOF", False)] and opened("cat << EOF\nx\nEOF\n") == [("EOF", True)]
    assert rehosted_official("registry.example.com/mirror/vllm/vllm-openai:v0.9.2@sha256:abc")
    assert not rehosted_official("docker.io/vllm/vllm-openai:v0.9.2") and not rehosted_official("vllm/vllm-openai")

    doc = parse_script("if [ -n x ]; then EAGER=1; fi\nexport A=2 B=3\n", "s.sh")
    assert sorted(_assignments(_tokens(doc, doc.derived["shell-words"], 0))) == ["A", "B", "EAGER"]

    write(tmp_path, "scripts/serve.sh", "#!/bin/bash\nvllm serve m\n")

    def found(text):
        got = launched_script(parse_dockerfile(text, "Dockerfile"), str(tmp_path))
        return None if got is None else got[0][len(str(tmp_path)) + 1:]

    assert found('FROM x\nCMD ["./missing.sh"]\n') is None
    assert found('FROM x\nCOPY . /app\nCMD ["/app/scripts/serve.sh"]\n') == "scripts/serve.sh"
    assert found('FROM x\nCOPY run.sh /app/\nCMD ["/app/scripts/serve.sh"]\n') is None  # not what COPY put there


def test_invalid_yaml_in_a_heredoc_config_is_an_input_error_at_its_script_line(tmp_path, hermetic):
    text = "#!/bin/bash\ncat > c.yaml <<'EOF'\nmodel: m\n  bad: [\nEOF\nvllm serve --config c.yaml\n"
    r = _check(tmp_path, "serve.sh", text)
    assert r.exit_code == 2 and "Traceback" not in r.stderr
    assert "serve.sh:4:6: error: invalid YAML: mapping values are not allowed" in r.stderr, r.stderr


def test_template_marks_outside_valid_yaml_are_still_neutralised():
    from sits_doctor.source_yaml import parse_yaml

    (doc,) = parse_yaml("image: {{ .Values.image }}\nargs: [--max-model-len, 4096]\n", "chart.yaml")
    assert doc.data["image"].startswith("__tp") and "/image" in doc.templated


@pytest.mark.parametrize("flags, said", [
    ("--cpu-offload-gb 20", "--cpu-offload-gb '20'"),  # weights offloaded: the memory model does not follow it
    ("--kv-cache-dtype $KV", "--kv-cache-dtype is '$KV'"),  # a guessed KV dtype would be a guessed verdict
])
def test_capacity_says_not_checked_where_the_memory_rules_do(tmp_path, hermetic, flags, said):
    write(tmp_path, "serve.sh", f"#!/bin/bash\nvllm serve meta-llama/Llama-3.1-8B-Instruct {flags}\n")
    r = run_cli("capacity", "serve.sh", "--gpu", "H100", "--isolated", cwd=tmp_path)
    assert r.exit_code in (0, 1), r.stderr
    assert said in r.stdout and "not checked" in r.stdout, r.stdout
