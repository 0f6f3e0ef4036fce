"""No secret in any output (issue 27 #1): tokens seeded in command-line flags, environment
variables, ``export`` lines, model URLs and values a parser rejects never appear in the five
report formats, a ``-o`` report, the ``fix`` diff, the ``fix --apply`` lines, ``capacity`` or a
baseline file — and ``fix --apply`` still writes them back untouched.

The secrets are made up here, fresh for each run, in the shapes real ones have (``hf_…``,
``sk-…``, ``AKIA…``) and without any shape (a password only its name gives away).
"""

from __future__ import annotations

import json
import random
import string
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import FIXTURES, run_cli

MARKER = "***"  # sits_doctor.redact.MARKER

FORMATS = ("text", "json", "sarif", "github", "junit")


def _secrets() -> dict[str, str]:
    rng = random.SystemRandom()

    def pick(alphabet: str, n: int) -> str:
        return "".join(rng.choice(alphabet) for _ in range(n))

    alnum = string.ascii_letters + string.digits
    return {
        "hf_export": "hf_" + pick(alnum, 30) + "Z9",
        "hf_flag": "hf_" + pick(alnum, 30) + "Y8",
        "hf_env": "hf_" + pick(alnum, 30) + "X7",
        "hf_rejected": "hf_" + pick(alnum, 30) + "W6",
        "sk_flag": "sk-proj-" + pick(alnum, 30) + "V5",
        "sk_list": "sk-" + pick(alnum, 30) + "U4",
        "sk_rejected": "sk-" + pick(alnum, 30) + "T3",
        "aws": "AKIA" + pick(string.ascii_uppercase + string.digits, 16),
        "url_password": "pw" + pick(string.ascii_lowercase, 12),
        "url_password2": "pw" + pick(string.ascii_lowercase, 12),
        "plain_env": "plain" + pick(string.ascii_lowercase, 12),
        "plain_yaml": "plain" + pick(string.ascii_lowercase, 12),
        "plain_docker": "plain" + pick(string.ascii_lowercase, 12),
        "plain_list": "plain" + pick(string.ascii_lowercase, 12),
    }


def _seed(root: Path, s: dict[str, str]) -> list[Path]:
    """Deployments that each have a fix (a removed flag, so the diff shows its neighbours) and a
    rejected value, with secrets on the lines around them."""
    files = {
        "serve.sh": (
            "#!/bin/bash\n"
            f"export HF_TOKEN={s['hf_export']}\n"
            f"export AWS_ACCESS_KEY_ID={s['aws']}\n"
            f"vllm serve https://alice:{s['url_password']}@huggingface.co/org/m \\\n"
            f"  --api-key {s['sk_flag']} \\\n"
            f"  --hf-token {s['hf_flag']} \\\n"
            f"  --swap-space 4 --max-model-len {s['hf_rejected']}\n"
        ),
        "k8s.yaml": (
            "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: llm\nspec:\n  template:\n    spec:\n"
            "      containers:\n        - name: vllm\n          image: vllm/vllm-openai:v0.19.0\n"
            "          env:\n"
            "            - name: OPENAI_API_KEY\n"
            f"              value: {s['plain_env']}\n"
            "          args:\n"
            f"            - --model=https://bob:{s['url_password2']}@host.example/org/m\n"
            "            - --api-key\n"
            f"            - \"{s['sk_list']}\"\n"
            "            - --swap-space\n"
            "            - \"4\"\n"
            "            - --hf-token\n"
            f"            - {s['plain_list']}\n"
            f"            - --max-model-len={s['sk_rejected']}\n"
        ),
        "compose.yaml": (
            "services:\n  vllm:\n    image: vllm/vllm-openai:v0.19.0\n    environment:\n"
            f"      - HF_TOKEN={s['hf_env']}\n"
            f"      - DB_PASSWORD={s['plain_yaml']}\n"
            "    command: --model org/m --swap-space 8 --max-num-seqs 64\n"
        ),
        "Dockerfile": (
            "FROM vllm/vllm-openai:v0.19.0\n"
            f"ENV SERVICE_PASSWORD {s['plain_docker']}\n"
            f"ENV HF_TOKEN={s['hf_env']}\n"
            "CMD [\"--model\", \"org/m\", \"--swap-space\", \"4\"]\n"
        ),
    }
    # capacity names the model it sized: here a local folder whose name holds a token
    model = root / f"models-{s['hf_flag']}"
    model.mkdir()
    (model / "config.json").write_text((FIXTURES / "hf" / "qwen2.5-7b-instruct" / "config.json").read_text(encoding="utf-8"),
                                       encoding="utf-8")
    files["vllm.yaml"] = (f"model: ./{model.name}\n"
                          f"api-key: {s['plain_yaml']}\n"
                          "max-model-len: 32768\n"
                          "swap-space: 4\n")
    paths = []
    for name, text in files.items():
        path = root / name
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths


def _leaks(text: str, s: dict[str, str]) -> list[str]:
    """The secrets (or the last 10 characters of one: half a token is still a leak) in ``text``."""
    return [name for name, value in s.items() if value in text or value[-10:] in text]


def test_no_secret_in_any_output(tmp_path):
    s = _secrets()
    work = tmp_path / "deploy"
    work.mkdir()
    seeded = _seed(work, s)
    originals = {p.name: p.read_text(encoding="utf-8") for p in seeded}
    outputs: dict[str, str] = {}

    def run(label: str, *args: str, codes=(0, 1)) -> str:
        result = run_cli(*args, cwd=tmp_path)
        assert result.exit_code in codes, f"{label}: exit {result.exit_code}: {result.stderr}"
        assert "Traceback" not in result.stderr
        outputs[label] = result.stdout + result.stderr
        return result.stdout

    for fmt in FORMATS:
        out = run(f"check --format {fmt}", "check", "deploy", "--isolated", "--fail-on", "info", "--format", fmt, "-v")
        written = tmp_path / f"report.{fmt}"
        run(f"check -o ({fmt})", "check", "deploy", "--isolated", "--format", fmt, "-o", str(written))
        outputs[f"-o report.{fmt}"] = written.read_text(encoding="utf-8")
        if fmt in ("json", "sarif"):
            json.loads(out)  # redaction keeps the formats valid
            json.loads(outputs[f"-o report.{fmt}"])
        elif fmt == "junit":
            ET.fromstring(out.encode())
    diff = run("fix (diff)", "fix", "deploy", "--isolated", "--unsafe-fixes")
    sized = run("capacity (sized)", "capacity", "deploy/vllm.yaml", "--isolated", "--gpu", "H100")
    run("fix --apply", "fix", "deploy", "--isolated", "--unsafe-fixes", "--apply")
    run("capacity", "capacity", "deploy", "--isolated", "--gpu", "H100")
    run("capacity json", "capacity", "deploy", "--isolated", "--gpu", "H100", "--format", "json")
    baseline = tmp_path / "baseline.json"
    run("write-baseline", "check", "deploy", "--isolated", "--write-baseline", str(baseline))
    outputs["baseline file"] = baseline.read_text(encoding="utf-8")

    leaked = {label: _leaks(text, s) for label, text in outputs.items() if _leaks(text, s)}
    assert leaked == {}
    # the outputs are about the seeded files: the findings, a diff of each, what was fixed, the sizing
    assert "SITS201" in outputs["check --format text"] and "SITS204" in outputs["check --format text"]
    assert diff.count("--- a/") == len(seeded) and MARKER in diff
    assert "fixed: " in outputs["fix --apply"] and "KV per token" in sized
    # what --apply wrote is the real text: every secret still there, only the removed flags gone
    for path in seeded:
        now = path.read_text(encoding="utf-8")
        assert now != originals[path.name], path.name
        assert [v for v in s.values() if v in originals[path.name] and v not in now] == [], path.name


def test_quoted_line_keeps_its_caret_under_the_flag(tmp_path):
    token = "sk-" + "Ab1" * 10
    (tmp_path / "serve.sh").write_text(f"vllm serve org/m --api-key {token} --swap-space 4\n", encoding="utf-8")
    out = run_cli("check", "serve.sh", "--isolated", cwd=tmp_path).stdout
    source, caret = [line for line in out.splitlines() if " | " in line][:2]
    assert token not in out and f"--api-key {MARKER} --swap-space" in source
    assert source[caret.index("^"):].startswith("--swap-space")


def test_name_on_the_line_above_is_seen_in_the_diff(tmp_path):
    """The diff's context starts below the ``name:`` of an env pair: its value is still hidden."""
    secret = "plain" + "q" * 12
    lines = ["apiVersion: v1", "kind: Pod", "metadata:", "  name: p", "spec:", "  containers:", "    - name: vllm",
             "      image: vllm/vllm-openai:v0.19.0", "      env:", "        - name: SERVICE_API_KEY",
             f"          value: {secret}", "        - name: OTHER", "          value: x", "      args: [\"--model\", \"org/m\", \"--swap-space\", \"4\"]"]
    (tmp_path / "pod.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    diff = run_cli("fix", "pod.yaml", "--isolated", cwd=tmp_path).stdout
    assert "          value: ***" in diff and "SERVICE_API_KEY" not in diff and secret not in diff


@pytest.mark.parametrize("text", [
    "max_num_batched_tokens: 8192", "kv_bytes_per_token: 40960", "eos_token: \"</s>\"",
    "key: kv_cache_free_gpu_mem_fraction", "labelKey: nvidia.com/gpu.product", "--hf-token --port 8000",
    "--api-key $VLLM_API_KEY", "value: \"<your-hf-token>\"", "HF_TOKEN: # set with --env HF_TOKEN",
    "secretKeyRef: {name: hf-token, key: HF_TOKEN}", "--max-num-batched-token 8192", "hf_overrides: {}",
    "model: hf://org/m", "KV per token: 40.0 KiB/token/rank", "--disk-cache-dir /tmp/some-long-name-x-y-z",
])
def test_what_is_not_a_secret_stays(text):
    from sits_doctor.redact import redact

    assert redact(text) == text


def test_files_without_secrets_are_shown_as_they_are():
    """Every fixture holds no secret: redaction leaves each byte of them (and so their snapshots)."""
    from sits_doctor import redact

    changed = [p.relative_to(FIXTURES).as_posix() for p in sorted(FIXTURES.rglob("*"))
               if p.is_file() and p.suffix != ".snap" and redact.redact(p.read_text(encoding="utf-8", errors="replace"))
               != p.read_text(encoding="utf-8", errors="replace")]
    assert changed == []


def test_redaction_is_linear():
    """Adversarial text (runs that almost make a name, a flag, a token or a URL) costs about what
    plain text of the same size costs, and four times the text about four times the time."""
    from sits_doctor import redact

    units = ["a" * 50 + "_", "--a-b", "name: ", "hf_" + "a" * 19, "://" + "a" * 40, "TOKEN_", "sk-" + "-" * 30,
             "x: \"" + "a" * 30, "-\n- ", "=" * 20]

    def cost(size: int) -> float:
        text = "".join(units[i % len(units)] for i in range(size))
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            redact.redact(text)
            best = min(best, time.perf_counter() - start)
        return best

    assert cost(16_000) / cost(4_000) < 8  # quadratic would be 16
