"""Fuzzing: hostile inputs never break the command's contract (issue "Reliability").

For every input — a generated document shaped like a real config, or a mutated file from
``fixtures/`` — ``check``, every output format, a dry-run ``fix`` and ``fix --apply`` (on a copy)
must hold the invariant:

* the exit code is 0, 1 or 2, never 3 (no internal error, no exception escaping);
* no traceback in anything printed; the json / sarif output is JSON, the junit output is XML;
* each operation on one input takes < 5 s and raises the process's peak memory by < 256 MiB;
* nothing is written outside the fix target: ``check`` and a dry-run ``fix`` change nothing, and
  ``fix --apply`` changes only files under the target folder (a symlink leading out of it is not
  written through), leaving no temporary file behind.

Each input runs with a GPU known or not: none, one named as ``--gpu`` would name it (``H100``,
``L4``, ``A100-40GBx2``), or one a settings file beside the input names (``gpu = "L4"`` in
``.sits-doctor.toml``); a file may name its own (a node label, SkyPilot accelerators). The memory
rules only run once a GPU is known, so the number mutations (every number of a fixture replaced
by ``abc``, ``''``, ``.inf``, ``.nan``, ``1e400``, ``-1``, ``0``, ``8k``, ``1.5``, ``true``, ints
past 2**63 and past Python's int-string limit) always run with one.

Most inputs go through the in-process API (``engine.check``, ``fixer.fix_paths``, the
reporters); a smaller number through the real command (in-process) with ``--format`` and
``-o``. The same generators and harness drive the long run, ``bench/fuzz.py``, which imports this
module. Inputs found to break the invariant are kept below as ``xfail(strict=True)`` regression
cases; fix the bug and drop the mark.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import re
import resource
import shutil
import signal
import sys
import tempfile
import time
import traceback
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "fixtures"
# A hang detector, not a speed target (bench/cli_speed.py records how fast check is): one stage of one
# small input past this is stuck. Generous, so a loaded 2-core machine does not fail it by being slow.
TIME_LIMIT_S = 20.0
MEMORY_LIMIT_BYTES = 256 * 2**20
FORMATS = ("text", "json", "sarif", "github", "junit")

# --- document trees -------------------------------------------------------------------------------
#
# A generated document is a tree of Python values plus a few markers that the YAML writer below
# renders verbatim (so that it can write what yaml.safe_dump never would: anchors, aliases, merge
# keys, duplicate keys, 5000-digit integers, plain scalars that YAML 1.1 reads as booleans).


class Raw(str):
    """A scalar written verbatim (YAML: plain; JSON: as a bare token)."""


class Map(list):
    """A mapping as a list of (key, value) pairs: keys may repeat or be non-strings."""


@dataclass(frozen=True)
class Anchored:
    name: str
    value: object


@dataclass(frozen=True)
class Alias:
    name: str


MERGE = Raw("<<")


def _q(s: str, ascii_only: bool = True) -> str:
    return json.dumps(s, ensure_ascii=ascii_only)


def _scalar_yaml(v) -> str:
    if isinstance(v, Raw):
        return str(v)
    if isinstance(v, Alias):
        return f"*{v.name}"
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if math.isnan(v):
            return ".nan"
        if math.isinf(v):
            return ".inf" if v > 0 else "-.inf"
        return repr(v)
    if isinstance(v, int):
        return str(v)
    return _q(str(v), ascii_only=False)


def to_yaml(v, indent: int = 0, flow: bool = False) -> str:
    """Block-style YAML (flow style below a node whose key is prefixed ``flow:``)."""
    if isinstance(v, Anchored):
        inner = v.value
        if isinstance(inner, (Map, dict, list)) and inner and not flow:
            return f"&{v.name}\n" + to_yaml(inner, indent, flow)
        return f"&{v.name} " + to_yaml(inner, indent, flow).lstrip()
    if flow:
        if isinstance(v, (Map, dict)):
            items = v.items() if isinstance(v, dict) else v
            return "{" + ", ".join(f"{_key_yaml(k)}: {to_yaml(x, 0, True)}" for k, x in items) + "}"
        if isinstance(v, list):
            return "[" + ", ".join(to_yaml(x, 0, True) for x in v) + "]"
        return _scalar_yaml(v)
    pad = " " * indent
    if isinstance(v, (Map, dict)):
        items = list(v.items() if isinstance(v, dict) else v)
        if not items:
            return "{}"
        lines = []
        for k, x in items:
            lines.append(_entry(f"{pad}{_key_yaml(k)}:", x, indent))
        return "\n".join(lines)
    if isinstance(v, list):
        if not v:
            return "[]"
        return "\n".join(_entry(f"{pad}-", x, indent) for x in v)
    return _scalar_yaml(v)


def _entry(head: str, x, indent: int) -> str:
    inner = x.value if isinstance(x, Anchored) else x
    if isinstance(inner, (Map, dict, list)) and inner:
        body = to_yaml(x, indent + 2)
        if isinstance(x, Anchored):
            anchor, _, rest = body.partition("\n")
            return f"{head} {anchor}\n{rest}"
        return f"{head}\n{body}"
    return f"{head} {to_yaml(x, indent + 2).lstrip()}"


def _key_yaml(k) -> str:
    if isinstance(k, Raw):
        return str(k)
    if isinstance(k, str):
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.\-]*", k) and k.lower() not in {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}:
            return k
        return _q(k, ascii_only=False)
    return _scalar_yaml(k)


def to_json(v, indent: int | None = 2, level: int = 0) -> str:
    """JSON, allowing what the JSON writer would not: bare tokens (NaN, 10**5000), duplicate keys."""
    if isinstance(v, Anchored):
        return to_json(v.value, indent, level)
    if isinstance(v, Alias):
        return "null"
    nl = "\n" + " " * ((level + 1) * indent) if indent else ""
    end = "\n" + " " * (level * indent) if indent else ""
    if isinstance(v, (Map, dict)):
        items = [(k, x) for k, x in (v.items() if isinstance(v, dict) else v) if k is not MERGE]
        if not items:
            return "{}"
        return "{" + ",".join(f"{nl}{_q(str(k), False)}: {to_json(x, indent, level + 1)}" for k, x in items) + end + "}"
    if isinstance(v, list):
        if not v:
            return "[]"
        return "[" + ",".join(f"{nl}{to_json(x, indent, level + 1)}" for x in v) + end + "]"
    if isinstance(v, Raw):
        return str(v)
    if isinstance(v, float):
        return json.dumps(v)  # NaN / Infinity / -Infinity, as Python's json writes them
    return json.dumps(v, ensure_ascii=False)


# --- hostile values ---------------------------------------------------------------------------------

LOOKALIKE_DASHES = ("\u2010", "\u2011", "\u2012", "\u2013", "\u2014", "\u2212", "\ufe63", "\uff0d")
ODD_TEXT = (
    "\ufeff", "\x00", "\u200b", "\u202e", "\u00a0", "\r", "\r\n", "\t", "\x1b[31m", "\ud7ff", "\U0001f600",
    "\u0301", "\x7f", "\x85", "\u2028", "\u2029", "Ａ", "ǅ", "İ", "ß", "\uffff",
)
HUGE_DIGITS = "9" * 5000
HOSTILE_RAW_YAML = (
    HUGE_DIGITS, "-" + HUGE_DIGITS, "1" + "0" * 4400 + ".5", "1e99999", "-1e99999", ".nan", ".NaN", ".inf", "-.inf",
    "0x7fffffffffffffffffffffff", "0o777", "0b1010", "1_000_000", "190:20:30", "2024-02-30", "2024-01-01T00:00:00Z",
    "~", "yes", "No", "off", "ON", "y", "n", "!!binary aGVsbG8=", "!!str 5", "!!int '7'", "!!float x", "!!set {a, b}",
    "!!omap [a: 1]", "!!python/object:os.system", "!custom tag", "!!timestamp 2001-12-14", "'unterminated",
    "\"a\\x\"", "&", "*", "*undefined_alias", "|", ">-", "? a", "@x", "`x`", "%TAG", "{", "[", "]", "}", ",",
    "- - -", ": :", "#c", "0.", "-0", "+1", "1e3", "08", "0777", "12:30", "=", "<<",
)
HOSTILE_RAW_JSON = (
    HUGE_DIGITS, "-" + HUGE_DIGITS, "1" + "0" * 4400 + ".5", "1e99999", "-1e99999", "NaN", "Infinity", "-Infinity",
    "01", "-0", "1.", ".5", "+1", "0x10", "true", "null", '"\\ud800"', '"\\udfff\\ud800"', '"\\u0000"', "1e-99999",
)


def odd_text() -> st.SearchStrategy[str]:
    piece = st.one_of(
        st.sampled_from(ODD_TEXT), st.sampled_from(LOOKALIKE_DASHES),
        st.sampled_from(["{{ .Values.model }}", "{{- toYaml .Values.x | nindent 12 }}", "$(MODEL)", "${PORT:-8000}",
                         "$HOME", "`id`", "--", "-", "=", "'", '"', "\\", "#", ": ", " - ", "&&", ";", "|"]),
        st.text(max_size=6),
    )
    return st.lists(piece, max_size=4).map("".join)


def scalars() -> st.SearchStrategy:
    return st.one_of(
        st.integers(-3, 70000), st.integers(-(2**70), 2**70), st.booleans(), st.none(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from([0.0, -0.0, 0.9, 1.5, 1e308, 5e-324]),
        st.text(max_size=12), odd_text(),
    )


@st.composite
def hostile(draw, typical: st.SearchStrategy | None = None):
    """A typical value for the key, or a type swap: a list, a map, a huge int, NaN, a raw token."""
    choice = draw(st.integers(0, 9))
    if typical is not None and choice < 5:
        return draw(typical)
    if choice < 7:
        return draw(scalars())
    if choice == 7:
        return Raw(draw(st.sampled_from(HOSTILE_RAW_YAML)))
    if choice == 8:
        return draw(st.lists(scalars(), max_size=3))
    return Map(draw(st.lists(st.tuples(st.sampled_from(["a", "factor", "type", "level", "1"]), scalars()), max_size=3)))


@st.composite
def deep(draw, leaf):
    """``leaf`` nested 1..130 levels deep (past the loaders' limit of 100)."""
    depth = draw(st.sampled_from([1, 2, 5, 50, 99, 100, 101, 130]))
    value = leaf
    for i in range(depth):
        value = [value] if (i + depth) % 2 else Map([("k", value)])
    return value


def key_variants(name: str) -> st.SearchStrategy[str]:
    """``max_model_len`` as vLLM's --config spells it, and as typos / look-alikes would."""
    dashed = name.replace("_", "-")
    return st.one_of(
        st.just(dashed), st.just(name), st.just("--" + dashed), st.just(dashed.upper()), st.just(dashed + " "),
        st.sampled_from(LOOKALIKE_DASHES).map(lambda d: dashed.replace("-", d)),
        st.just(dashed + ".x"), st.just("no-" + dashed), st.just(dashed.replace("-", "\u00ad")),
    )


# --- config shapes ---------------------------------------------------------------------------------

def _vllm_option_names() -> list[str]:
    from sits_doctor.frameworks import vllm as fw

    return sorted(fw.OPTIONS)


VLLM_OPTIONS = _vllm_option_names()
MODELS = (
    "../hf/llama-3.1-8b-instruct", "../hf/qwen2.5-7b-instruct", "../hf/gemma-3-27b-it", "../hf/mistral-7b-v0.1",
    "../hf/qwen2.5-vl-7b-instruct", "../hf/llama-3.2-11b-vision-instruct", "../hf/falcon-mamba-7b-instruct",
    "../hf/tiny-random-llama", "../hf", "..", "/", "/dev/zero", "../hf/llama-3.1-8b-instruct/config.json",
    "meta-llama/Llama-3.1-8B-Instruct", "org/name/extra", "~", "", " ", "../../../../etc",
)
TYPICAL = {
    "model": st.sampled_from(MODELS),
    "max_model_len": st.sampled_from([2048, 8192, 32768, 131072, 262144, 10**12, -1, 0, "128k", "1K", "32,768", "auto", "-1"]),
    "swap_space": st.sampled_from([0, 4, 16, -4, 1.5, "4GiB"]),
    "gpu_memory_utilization": st.sampled_from([0.9, 1.0, 1.5, 0, -0.1, "90%"]),
    "tensor_parallel_size": st.sampled_from([1, 2, 8, 0, -1]),
    "enable_prefix_caching": st.sampled_from([True, False, Raw("yes"), Raw("off"), Raw("False"), 0, 1, "false", "true"]),
    "enforce_eager": st.sampled_from([True, False, Raw("no"), "False", 1]),
    "kv_cache_dtype": st.sampled_from(["auto", "fp8", "fp8_e5m2", "int4", "FP8"]),
    "dtype": st.sampled_from(["auto", "bfloat16", "float16", "half", "float", "fp8"]),
    "rope_scaling": st.just(Map([("rope_type", "yarn"), ("factor", 4.0), ("original_max_position_embeddings", 32768)])),
}


def _compilation_config():
    inner = Map([("cudagraph_capture_sizes", [1, 2, 4, 8]), ("max_capture_size", 256), ("level", 3),
                 ("cudagraph_mode", "FULL_AND_PIECEWISE"), ("use_cudagraph", True), ("mode", 3)])
    return st.one_of(
        st.just(inner), st.just(to_json(inner, None)), st.just(Raw("3")), st.just("{not json"),
        st.just('{"level": ' + HUGE_DIGITS + "}"), st.just('{"cudagraph_capture_sizes": [1, "x", null, -1]}'),
        st.integers(-1, 4),
    )


@st.composite
def option_value(draw, name: str):
    typical = TYPICAL.get(name)
    if name == "compilation_config":
        typical = _compilation_config()
    elif name == "hf_overrides":
        typical = st.one_of(st.just(Map([("max_position_embeddings", 1 << 20), ("rope_scaling", None)])),
                            st.just('{"max_position_embeddings": 4096}'), st.just("{"))
    return draw(hostile(typical))


@st.composite
def vllm_settings(draw, min_size: int = 1) -> Map:
    names = draw(st.lists(st.sampled_from(VLLM_OPTIONS + ["not_an_option", "port", "host", "config"]),
                          min_size=min_size, max_size=7))
    items = [("model", draw(option_value("model")))] if draw(st.booleans()) else []
    for n in names:
        items.append((draw(key_variants(n)), draw(option_value(n))))
    return Map(items)


@st.composite
def vllm_config(draw):
    return draw(vllm_settings()), "serve.yaml"


@st.composite
def shell_word(draw):
    name = draw(st.sampled_from(VLLM_OPTIONS))
    value = draw(hostile(TYPICAL.get(name, st.sampled_from(["8192", "4", "auto", "true"]))))
    value = value if isinstance(value, str) else json.dumps(value) if not isinstance(value, (Map, Anchored, Alias)) else "{}"
    dash = draw(st.sampled_from(["--", "--", "--", "-", "\u2013", "\u2014", "\u2212\u2212", "--no-"]))
    sep = draw(st.sampled_from([" ", "=", " \\\n  ", "  ", "\t", "\u00a0"]))
    quote = draw(st.sampled_from(["", "", "'", '"']))
    return f"{dash}{name.replace('_', '-')}{sep}{quote}{value}{quote}"


@st.composite
def vllm_command(draw) -> list[str]:
    """argv-style words of a ``vllm serve`` invocation."""
    head = draw(st.sampled_from([["vllm", "serve"], ["python3", "-m", "vllm.entrypoints.openai.api_server"],
                                 ["vllm", "serve", "--config", "/etc/vllm.yaml"], ["vllm"], ["serve"]]))
    model = draw(st.sampled_from(MODELS + ("--model", "$(MODEL)", "${MODEL}")))
    flags = draw(st.lists(shell_word(), max_size=5))
    return head + [model] + flags


@st.composite
def shell_script(draw) -> str:
    argv = draw(vllm_command())
    joiner = draw(st.sampled_from([" ", " \\\n  ", " \\\r\n  ", "\n"]))
    pre = draw(st.sampled_from(["", "set -e; ", "huggingface-cli download x && ", "exec ", "cd /m; ", "if true; then ",
                                "cat <<EOF\nvllm serve x\nEOF\n", "'", "$(", "echo \"", "(", "{ "]))
    post = draw(st.sampled_from(["", " &", " || exit 1", "; fi", " 2>&1 | tee log", " #", "'", ")", " }"]))
    return pre + joiner.join(argv) + post


@st.composite
def container(draw) -> Map:
    image = draw(st.sampled_from(["vllm/vllm-openai:v0.11.0", "vllm/vllm-openai:latest", "vllm/vllm-openai:v0.6.0",
                                  "vllm/vllm-openai:v99.0.0", "vllm/vllm-openai@sha256:abc", "vllm/vllm-openai:",
                                  "nvcr.io/nvidia/tritonserver", "vllm/vllm-openai:v" + "9" * 400]))
    style = draw(st.integers(0, 3))
    items: list = [("name", draw(st.sampled_from(["vllm", "", "x" * 300]))), ("image", draw(hostile(st.just(image))))]
    if style == 0:
        items.append(("command", ["/bin/sh", draw(st.sampled_from(["-c", "-ec", "-lc", "-xc", "-exc", "\u2013c"]))]))
        items.append(("args", [draw(shell_script())]))
    elif style == 1:
        items.append(("command", draw(hostile(st.just(draw(vllm_command()))))))
    elif style == 2:
        items.append(("args", draw(hostile(st.just(draw(vllm_command())[2:])))))
    else:
        items.append(("command", ["sh", "-c", draw(shell_script())]))
        items.append(("args", draw(hostile(st.lists(st.text(max_size=5), max_size=2)))))
    if draw(st.booleans()):
        env = draw(st.lists(st.tuples(st.sampled_from(["MODEL", "PORT", "VLLM_USE_V1", "HF_HOME", "X"]),
                                      hostile(st.sampled_from(["../hf/qwen2.5-7b-instruct", "8000", "1", "$(MODEL)"]))),
                            max_size=3))
        items.append(("env", draw(hostile(st.just([Map([("name", k), ("value", v)]) for k, v in env])))))
    return Map(items)


@st.composite
def kubernetes(draw):
    kind = draw(st.sampled_from(["Deployment", "StatefulSet", "Pod", "Job", "LeaderWorkerSet", "DaemonSet", "CronJob"]))
    containers = draw(st.lists(container(), min_size=1, max_size=2))
    pod = Map([("containers", draw(hostile(st.just(containers))))])
    if draw(st.booleans()):
        pod.append(("initContainers", containers[:1]))
    if kind == "Pod":
        spec = pod
    elif kind == "LeaderWorkerSet":
        spec = Map([("leaderWorkerTemplate", Map([("leaderTemplate", Map([("spec", pod)])),
                                                  ("workerTemplate", Map([("spec", pod)]))]))])
    elif kind == "CronJob":
        spec = Map([("jobTemplate", Map([("spec", Map([("template", Map([("spec", pod)]))]))]))])
    else:
        spec = Map([("replicas", draw(hostile(st.just(1)))), ("template", Map([("spec", pod)]))])
    doc = Map([("apiVersion", "apps/v1"), ("kind", kind), ("metadata", Map([("name", draw(hostile(st.just("llm"))))])),
               ("spec", spec)])
    name = "deploy.json" if draw(st.integers(0, 5)) == 0 else "deploy.yaml"
    return doc, name


@st.composite
def compose(draw):
    services = []
    for i in range(draw(st.integers(1, 2))):
        svc = [("image", draw(st.sampled_from(["vllm/vllm-openai:v0.19.0", "vllm/vllm-openai:v0.8.5", "vllm/vllm-openai"])))]
        style = draw(st.integers(0, 3))
        cmd = draw(vllm_command())[2:]
        if style == 0:
            svc.append(("command", " ".join(cmd)))
        elif style == 1:
            svc.append(("command", cmd))
        elif style == 2:
            svc.append(("entrypoint", draw(st.sampled_from([["vllm", "serve"], "vllm serve", ["python3", "-m", "vllm.entrypoints.openai.api_server"]]))))
            svc.append(("command", draw(hostile(st.just(cmd)))))
        else:
            svc.append(("command", Raw(">-\n      " + " ".join(c.replace("\n", " ") for c in cmd if c.strip()) or "x")))
        if draw(st.booleans()):
            svc.append(("environment", draw(st.one_of(
                st.just(["MODEL=../hf/qwen2.5-7b-instruct", "VLLM_ATTENTION_BACKEND=XFORMERS", "=", "NOVALUE"]),
                st.just(Map([("MODEL", "x"), ("PORT", 8000), ("N", None)])), hostile()))))
        services.append((draw(st.sampled_from(["vllm", f"svc{i}", "1", "yes"])), Map(svc)))
    return Map([("services", Map(services))]), "compose.yaml"


@st.composite
def helm_values(draw):
    spec = []
    for _ in range(draw(st.integers(1, 2))):
        vllm_cfg = Map([(draw(st.sampled_from(["enablePrefixCaching", "enableChunkedPrefill", "maxModelLen", "dtype",
                                                "tensorParallelSize", "gpuMemoryUtilization", "gpu_memory_utilization",
                                                "maxNumSeqs", "extraArgs", "swapSpace", "unknownKey"])),
                         draw(hostile(st.sampled_from([True, 8192, "bfloat16", 0.9, ["--swap-space", "4"], ["--no-enable-log-requests"]]))))
                        for _ in range(draw(st.integers(0, 4)))])
        item = Map([("name", "llama3"), ("repository", "vllm/vllm-openai"),
                    ("tag", draw(hostile(st.sampled_from(["v0.10.2", "latest", "v0.6.0", "{{ .Values.tag }}"])))),
                    ("modelURL", draw(hostile(st.sampled_from(MODELS)))), ("vllmConfig", draw(hostile(st.just(vllm_cfg))))])
        if draw(st.booleans()):
            item.append(("enabled", draw(hostile(st.just(True)))))
        spec.append(item)
    return Map([("servingEngineSpec", Map([("modelSpec", spec)]))]), "values.yaml"


@st.composite
def helm_template(draw):
    """A chart template: a Deployment with ``{{ }}`` actions in keys, values and whole lines."""
    doc, _ = draw(kubernetes())
    text = to_yaml(doc)
    lines = text.split("\n")
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(lines)))
        action = draw(st.sampled_from([
            "{{- if .Values.enabled }}", "{{- end }}", "{{ include \"x\" . | nindent 4 }}", "{{/* a\ncomment */}}",
            "  - --max-model-len={{ .Values.len }}", "{{ .Values.key }}: 1", "{{", "}}", "{{- toYaml .Values | nindent 8 -}}"]))
        lines.insert(i, action)
    return "\n".join(lines), "templates/deployment.yaml"


@st.composite
def hf_config(draw):
    items = [("architectures", draw(hostile(st.just(["LlamaForCausalLM"])))),
             ("model_type", draw(hostile(st.sampled_from(["llama", "qwen2", "gemma3", "mistral", "mllama", "falcon_mamba"]))))]
    for key, typical in (("hidden_size", st.just(4096)), ("num_hidden_layers", st.just(32)),
                         ("num_attention_heads", st.just(32)), ("num_key_value_heads", st.just(8)),
                         ("max_position_embeddings", st.sampled_from([8192, 131072, 0, -1])),
                         ("rope_theta", st.just(500000.0)), ("sliding_window", st.sampled_from([4096, None])),
                         ("torch_dtype", st.just("bfloat16")), ("vocab_size", st.just(128256))):
        if draw(st.integers(0, 3)):
            items.append((key, draw(hostile(typical))))
    if draw(st.booleans()):
        items.append(("rope_scaling", draw(hostile(st.just(Map([
            ("rope_type", draw(st.sampled_from(["llama3", "yarn", "linear", "dynamic", "longrope", None, 1]))),
            ("factor", draw(hostile(st.just(8.0)))),
            ("original_max_position_embeddings", draw(hostile(st.just(8192)))),
            ("type", draw(st.sampled_from(["yarn", "su", ""])))]))))))
    if draw(st.booleans()):
        items.append(("text_config", draw(hostile(st.just(Map(items[2:]))))))
    return Map(items), "config.json"


@st.composite
def generation_config(draw):
    return Map([("_from_model_config", True), ("transformers_version", "4.51.0"),
                ("max_length", draw(hostile(st.just(4096)))), ("cache_implementation", draw(hostile(st.just("static")))),
                ("do_sample", draw(hostile(st.just(True))))]), "generation_config.json"


@st.composite
def ortgenai(draw):
    provider = draw(st.sampled_from(["cuda", "dml", "cpu", "webgpu", "x"]))
    decoder = Map([
        ("session_options", draw(hostile(st.just(Map([
            ("log_id", "onnxruntime-genai"),
            ("provider_options", draw(hostile(st.just([Map([(provider, Map([
                (draw(st.sampled_from(["enable_cuda_graph", "enableCudaGraph", "cuda_graph", "x"])),
                 draw(hostile(st.sampled_from(["0", "1", 1, True])))),
            ]))])])))),
            (draw(st.sampled_from(["intra_op_num_threads", "graph_optimization_level", "typo_key"])), draw(hostile())),
        ]))))),
        ("filename", "model.onnx"), ("head_size", draw(hostile(st.just(96)))),
        ("num_key_value_heads", draw(hostile(st.just(32)))), (draw(st.sampled_from(["inputs", "outputs", "unknown_key"])), Map([])),
    ])
    model = Map([("context_length", draw(hostile(st.just(4096)))), ("decoder", draw(hostile(st.just(decoder)))),
                 ("type", draw(st.sampled_from(["phi3", "llama", "qwen2"])))])
    search = Map([(k, draw(hostile(st.just(v)))) for k, v in
                  (("max_length", 4096), ("num_beams", 1), ("do_sample", False), ("past_present_share_buffer", True))])
    return Map([("model", model), ("search", draw(hostile(st.just(search))))]), "genai_config.json"


@st.composite
def trtllm_llmapi(draw):
    from sits_doctor.loaders import trtllm as t

    keys = draw(st.lists(st.sampled_from(sorted(t.LLMAPI_KEYS)), min_size=1, max_size=6))
    items = []
    for k in keys:
        typical = {
            "kv_cache_config": st.just(Map([("free_gpu_memory_fraction", 0.9), ("enable_block_reuse", True), ("dtype", "fp8")])),
            "cuda_graph_config": st.just(Map([("max_batch_size", 256), ("padding_enabled", True), ("batch_sizes", [1, 2, 4])])),
            "pytorch_backend_config": st.just(Map([("use_cuda_graph", True), ("cuda_graph_batch_sizes", [1, 2])])),
            "backend": st.sampled_from(["pytorch", "tensorrt", "_autodeploy"]),
        }.get(k, st.sampled_from([True, 256, "x"]))
        items.append((k, draw(hostile(typical))))
    return Map(items), "extra_llm_api_options.yaml"


@st.composite
def trtllm_engine(draw):
    pretrained = Map([("architecture", "LlamaForCausalLM"), ("dtype", "bfloat16"),
                      ("max_position_embeddings", draw(hostile(st.just(131072)))),
                      ("quantization", draw(hostile(st.just(Map([("quant_algo", "FP8"), ("kv_cache_quant_algo", None)])))))])
    build = Map([("max_seq_len", draw(hostile(st.just(8192)))), ("max_batch_size", draw(hostile(st.just(64)))),
                 ("plugin_config", draw(hostile(st.just(Map([("use_paged_context_fmha", True)])))))])
    return Map([("version", draw(st.sampled_from(["0.17.0", "1.0.0", "x", ""]))), ("pretrained_config", pretrained),
                ("build_config", build)]), "config.json"


SHAPES = {
    "vllm": vllm_config(), "k8s": kubernetes(), "compose": compose(), "helm": helm_values(),
    "helm-template": helm_template(), "hf": hf_config(), "ortgenai": ortgenai(), "trtllm-llmapi": trtllm_llmapi(),
    "trtllm-engine": trtllm_engine(),
}


@st.composite
def with_yaml_tricks(draw, doc):
    """Anchors / aliases / merge keys, deep nesting and type swaps spliced into a document."""
    if not isinstance(doc, Map) or not doc:
        return doc
    doc = Map(doc)
    trick = draw(st.integers(0, 7))
    i = draw(st.integers(0, len(doc) - 1))
    key, value = doc[i]
    if trick == 0:  # anchor a value and use it again
        doc[i] = (key, Anchored("a", value))
        doc.append((draw(st.sampled_from(["x-copy", key, "max-model-len"])), Alias("a")))
    elif trick == 1 and isinstance(value, Map):  # merge key
        doc[i] = (key, Anchored("base", value))
        doc.append(("x-merged", Map([(MERGE, Alias("base")), ("extra", 1)])))
        if draw(st.booleans()):
            doc.append((MERGE, Alias("base")))
    elif trick == 2:
        doc[i] = (key, draw(deep(value)))
    elif trick == 3:  # duplicate key
        doc.append((key, draw(hostile())))
    elif trick == 4:  # a key that is not a string
        doc.append((draw(st.sampled_from([Raw("1"), Raw("yes"), Raw("~"), Raw("[a, b]"), Raw("? x"), Raw("3.5")])),
                    draw(scalars())))
    elif trick == 5:  # self-referencing / undefined alias
        doc.append(("loop", Alias(draw(st.sampled_from(["a", "nope"])))))
    elif trick == 6:  # many aliases of one anchor (billion-laughs shape, small)
        doc[i] = (key, Anchored("l0", ["x"] * 9))
        for n in range(1, draw(st.integers(1, 9))):
            doc.append((f"l{n}", Anchored(f"l{n}", [Alias(f"l{n - 1}")] * 9)))
    return doc


# --- byte-level damage ---------------------------------------------------------------------------------

TEXT_DAMAGE = ("bom", "crlf", "nul", "non-utf8", "tab", "odd-unicode", "truncate", "helm", "cr-only",
               "dash-lookalike", "utf16", "long-line", "doc-separator")


def damage(data: bytes, kind: str, at: float) -> bytes:
    """One text-level corruption of ``data`` at relative offset ``at`` (0..1)."""
    n = len(data)
    i = int(at * n)
    if kind == "bom":
        return b"\xef\xbb\xbf" + data
    if kind == "crlf":
        return data.replace(b"\n", b"\r\n")
    if kind == "cr-only":
        return data.replace(b"\n", b"\r")
    if kind == "nul":
        return data[:i] + b"\x00" + data[i:]
    if kind == "non-utf8":
        return data[:i] + b"\xff\xfe\xc3(" + data[i:]
    if kind == "tab":
        j = data.rfind(b"\n", 0, i) + 1
        return data[:j] + b"\t" + data[j:]
    if kind == "odd-unicode":
        return data[:i] + "\u202e\u200b\ufeff\u2028".encode() + data[i:]
    if kind == "truncate":
        return data[:i]
    if kind == "helm":
        j = data.rfind(b"\n", 0, i) + 1
        return data[:j] + b"{{- if .Values.x }}\n" + data[j:] + b"\n{{- end }}\n"
    if kind == "dash-lookalike":
        return data.replace(b"-", "\u2013".encode(), 1 + int(at * 5))
    if kind == "utf16":
        return data.decode("utf-8", "replace").encode("utf-16")
    if kind == "long-line":
        return data[:i] + b"x" * 200_000 + data[i:]
    if kind == "doc-separator":
        return data[:i] + b"\n---\n" + data[i:]
    raise ValueError(kind)


# --- the inputs ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    """One input: a file (and maybe sidecars) written under a fresh target folder."""

    kind: str  # "gen:<shape>" or "mut:<fixture path>"
    name: str  # path of the file under the target folder
    data: bytes
    sidecars: tuple[tuple[str, bytes], ...] = ()
    targets: tuple[str, ...] = ()
    unsafe: bool = False
    symlink: bool = False  # the file lives outside the target; the target holds a symlink to it
    name_the_link: bool = False  # with symlink: name the link itself on the command line (not its folder)
    gpu: str = ""  # "" none given; "H100": --gpu H100; "settings:L4": gpu = "L4" in a .sits-doctor.toml beside it

    @property
    def gpu_option(self) -> str | None:
        """The ``--gpu`` value, when the GPU is given on the command line."""
        return self.gpu if self.gpu and not self.gpu.startswith(SETTINGS_GPU) else None

    @property
    def gpu_setting(self) -> str | None:
        """The ``gpu = "..."`` of the settings file written beside the input, when there is one."""
        return self.gpu[len(SETTINGS_GPU):] if self.gpu.startswith(SETTINGS_GPU) else None

    def describe(self) -> str:
        extra = [f"--target {t}" for t in self.targets] + (["--unsafe-fixes"] if self.unsafe else [])
        extra += [f"--gpu {self.gpu_option}"] if self.gpu_option else []
        extra += [f"(gpu = {self.gpu_setting!r} in .sits-doctor.toml)"] if self.gpu_setting else []
        extra += ["(via a symlink leaving the target)"] if self.symlink else []
        return f"{self.kind}: {self.name} ({len(self.data)} bytes) {' '.join(extra)}".strip()


SETTINGS_GPU = "settings:"
SETTINGS_FILE = ".sits-doctor.toml"
# GPUs as the command line and settings files name them (a big one, a small one, several); "": none
GPUS_GIVEN = ("H100", "L4", "A100-40GBx2", "T4", SETTINGS_GPU + "L4", SETTINGS_GPU + "H100x2")
GPUS = st.sampled_from(("", "") + GPUS_GIVEN)
TARGETS = st.sampled_from([(), (), ("vllm==0.20.0",), ("vllm==0.6.0",), ("vllm==99.1",), ("trtllm==1.2.0",),
                           ("ortgenai==0.18.0",), ("vllm==0.10.2", "trtllm==0.17.0")])


@st.composite
def generated_cases(draw, shapes: tuple[str, ...] | None = None) -> Case:
    shape = draw(st.sampled_from(shapes or tuple(SHAPES)))
    doc, name = draw(SHAPES[shape])
    if isinstance(doc, str):
        text = doc
    else:
        doc = draw(with_yaml_tricks(doc))
        if name.endswith(".json"):
            text = to_json(doc, draw(st.sampled_from([2, None])))
        else:
            text = to_yaml(doc, flow=draw(st.integers(0, 5)) == 0)
            if draw(st.integers(0, 4)) == 0:
                text = draw(st.sampled_from(["---\n", "%YAML 1.1\n---\n", "# c\n", "---\n# x\n...\n---\n"])) + text
            if draw(st.integers(0, 6)) == 0:
                other, _ = draw(SHAPES[draw(st.sampled_from(("vllm", "k8s", "compose")))])
                text += "\n---\n" + (other if isinstance(other, str) else to_yaml(other))
    if draw(st.integers(0, 3)) == 0 and name.endswith(".json") and shape == "hf":
        name = draw(st.sampled_from(["config.json", "model.json"]))
    data = (text + draw(st.sampled_from(["\n", "", "\n\n", " "]))).encode("utf-8", "surrogatepass")
    for kind in draw(st.lists(st.sampled_from(TEXT_DAMAGE), max_size=2)):
        data = damage(data, kind, draw(st.floats(0, 1)))
    sidecars: tuple = ()
    if shape == "hf" and draw(st.booleans()):
        gen, gname = draw(generation_config())
        sidecars = ((gname, to_json(gen).encode()),)
    return Case(f"gen:{shape}", name, data, sidecars, draw(TARGETS), draw(st.booleans()), draw(st.integers(0, 15)) == 0,
                gpu=draw(GPUS))


def fixture_files() -> list[Path]:
    return sorted(p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix in (".json", ".yaml", ".yml"))


FIXTURE_FILES = fixture_files()
MUTATIONS = ("flip", "truncate", "delete-line", "dup-line", "swap-type", "tab", "insert", "delete-span", "number") + TEXT_DAMAGE
SWAPS = (b"[1, 2]", b"{a: 1}", b"" + HUGE_DIGITS.encode(), b".nan", b"-1", b"true", b"null", b"''", b'"x"', b"1e999",
         b"*a", b"&a x", b"!!binary AA==", b"- x", b"{{ .Values.v }}", b"\xff", b"\"\\ud800\"", b"NaN", b"[[[[[[")


def mutate(data: bytes, op: str, at: float, salt: int) -> bytes:
    n = len(data)
    i = min(int(at * n), max(n - 1, 0))
    lines = data.split(b"\n")
    li = min(int(at * len(lines)), len(lines) - 1)
    if op == "flip":
        return data[:i] + bytes([data[i] ^ (1 << (salt % 8))]) + data[i + 1:] if n else data
    if op == "truncate":
        return data[:i]
    if op == "delete-line":
        return b"\n".join(lines[:li] + lines[li + 1:])
    if op == "dup-line":
        return b"\n".join(lines[:li + 1] + lines[li:])
    if op == "swap-type":  # replace the value after the line's first ':' (or list dash)
        line = lines[li]
        j = line.find(b": ")
        j = j + 2 if j >= 0 else (line.find(b"- ") + 2 if b"- " in line else len(line))
        end = len(line) - (1 if line.endswith(b",") else 0)
        lines[li] = line[:j] + SWAPS[salt % len(SWAPS)] + line[end:]
        return b"\n".join(lines)
    if op == "tab":
        lines[li] = b"\t" + lines[li].lstrip(b" ") if salt % 2 else lines[li].replace(b" ", b"\t", 1)
        return b"\n".join(lines)
    if op == "insert":
        return data[:i] + bytes([b"{}[]:,-\"'&*!|>#%@`\\\n\t\r"[salt % 22]]) + data[i:]
    if op == "delete-span":
        return data[:i] + data[i + 1 + salt % 40:]
    if op == "number":  # one number replaced by a word of the number mutations below
        return replace_numbers(data, [(at, salt)], data.lstrip()[:1] in (b"{", b"["))
    return damage(data, op, at)


@st.composite
def mutated_cases(draw) -> Case:
    path = draw(st.sampled_from(FIXTURE_FILES))
    data = path.read_bytes()
    ops = draw(st.lists(st.tuples(st.sampled_from(MUTATIONS), st.floats(0, 1), st.integers(0, 2**16)), min_size=1, max_size=4))
    for op, at, salt in ops:
        data = mutate(data, op, at, salt)
    rel = path.relative_to(FIXTURES)
    name = "/".join(rel.parts[1:]) if rel.parts[0] == "hf" else rel.name  # an HF model keeps its folder
    sidecars: tuple = ()
    if path.name == "config.json":
        sidecars = tuple((str(Path(name).with_name(s.name)), s.read_bytes()) for s in path.parent.glob("*.json") if s != path)
    return Case(f"mut:{rel}", name, data, sidecars, draw(TARGETS), draw(st.booleans()), draw(st.integers(0, 15)) == 0,
                gpu=draw(GPUS))


# --- number mutations ----------------------------------------------------------------------------------
#
# Every number of a fixture is a place to write what a typo or a template leaves there. The words
# are spelt for the place: a YAML or shell value, a JSON value, the inside of a quoted string.

NUMBER = re.compile(rb"(?<![\w.\-])-?\d+(?:\.\d+)?(?![\w.])")
HUGE_INTS = (b"9223372036854775808", b"1" + b"0" * 30, HUGE_DIGITS.encode())  # past int64, past floats' 1e30, past 4300 digits
NUMBER_WORDS_YAML = (b"abc", b"''", b".inf", b"-.inf", b".nan", b"NaN", b"1e400", b"-1", b"0", b"8k", b"1.5", b"true") + HUGE_INTS
NUMBER_WORDS_JSON = (b'"abc"', b'""', b"Infinity", b"-Infinity", b"NaN", b'"NaN"', b"1e400", b"-1", b"0", b'"8k"', b"1.5",
                     b"true") + HUGE_INTS
NUMBER_WORDS_QUOTED = (b"abc", b"", b"inf", b"-inf", b"nan", b"NaN", b"1e400", b"-1", b"0", b"8k", b"1.5", b"true") + HUGE_INTS
NUMBER_TARGETS = st.sampled_from([(), (), ("vllm==0.8.3",), ("vllm==0.9.0",), ("vllm==0.9.1",), ("vllm==0.13.0",),
                                  ("vllm==0.20.0",), ("vllm==0.34.0",), ("trtllm==1.0.0",), ("trtllm==0.17.0",),
                                  ("ortgenai==0.18.0",)])


def number_fixtures() -> list[Path]:
    """Every fixture a deployment is read from that holds a number: configs, launch scripts,
    Dockerfiles, Triton model configs (not the snapshots, READMEs or settings files)."""
    out = []
    for p in sorted(FIXTURES.rglob("*")):
        if p.is_file() and (p.suffix in (".json", ".yaml", ".yml", ".sh", ".pbtxt") or p.name.endswith("Dockerfile")):
            if NUMBER.search(p.read_bytes()):
                out.append(p)
    return out


NUMBER_FIXTURES = number_fixtures()


def number_words(data: bytes, start: int, end: int, json_file: bool) -> tuple[bytes, ...]:
    quoted = start > 0 and end < len(data) and data[start - 1:start] in (b'"', b"'") and data[end:end + 1] == data[start - 1:start]
    if quoted:
        return NUMBER_WORDS_QUOTED
    return NUMBER_WORDS_JSON if json_file else NUMBER_WORDS_YAML


def replace_numbers(data: bytes, picks: list[tuple[float, int]], json_file: bool) -> bytes:
    """``data`` with the numbers at relative places ``at`` replaced by the ``salt``-th word for their place."""
    spans = [m.span() for m in NUMBER.finditer(data)]
    chosen = {}
    for at, salt in picks:
        if spans:
            start, end = spans[min(int(at * len(spans)), len(spans) - 1)]
            words = number_words(data, start, end, json_file)
            chosen[(start, end)] = words[salt % len(words)]
    for (start, end), word in sorted(chosen.items(), reverse=True):
        data = data[:start] + word + data[end:]
    return data


@st.composite
def number_cases(draw) -> Case:
    """A fixture with one to three of its numbers replaced, checked with a GPU known."""
    path = draw(st.sampled_from(NUMBER_FIXTURES))
    rel = path.relative_to(FIXTURES)
    picks = draw(st.lists(st.tuples(st.floats(0, 1), st.integers(0, 2**16)), min_size=1, max_size=3))
    data = replace_numbers(path.read_bytes(), picks, path.suffix == ".json")
    name = "/".join(rel.parts[1:]) if rel.parts[0] == "hf" else rel.name
    sidecars: tuple = ()
    if path.name == "config.json":
        sidecars = tuple((str(Path(name).with_name(s.name)), s.read_bytes()) for s in path.parent.glob("*.json") if s != path)
    return Case(f"num:{rel}", name, data, sidecars, draw(NUMBER_TARGETS), draw(st.booleans()), gpu=draw(st.sampled_from(GPUS_GIVEN)))


# --- the harness --------------------------------------------------------------------------------------


class FuzzTimeout(Exception):
    pass


@dataclass
class Failure:
    stage: str  # check / render:<fmt> / fix-dry / fix-apply / cli:...
    what: str  # exception / internal-error / exit-code / traceback / malformed-output / timeout / memory / wrote-outside / ...
    message: str  # first line
    where: str = ""  # file:line of the crash, where known
    detail: str = ""

    @property
    def signature(self) -> tuple[str, str, str]:
        if self.where:  # one crash site is one bug, whichever stage met it
            return (self.what, self.where, "")
        return (self.what, re.sub(r"\d+", "N", self.message)[:80], self.stage.split(":")[0])

    def __str__(self) -> str:
        return f"[{self.stage}] {self.what}: {self.message}" + (f" (at {self.where})" if self.where else "")


def _crash_site(tb_text: str) -> str:
    """The innermost ``sits_doctor`` frame of a traceback text, as ``path:line``."""
    frames = re.findall(r'File "([^"]+)", line (\d+)', tb_text)
    ours = [(f, n) for f, n in frames if f"{os.sep}sits_doctor{os.sep}" in f or str(REPO) in f]
    ours = [(f, n) for f, n in ours if "test_fuzz" not in f and "bench" + os.sep + "fuzz" not in f]
    if not ours:
        return ""
    f, n = ours[-1]
    try:
        f = str(Path(f).resolve().relative_to(REPO))
    except ValueError:  # an installed copy
        f = re.sub(r".*?" + re.escape(os.sep) + r"(sits_doctor" + re.escape(os.sep) + ")", r"\1", f)
    return f"{f}:{n}"


def _short(text: str, width: int = 200, lines: int = 40) -> str:
    out = [ln if len(ln) <= width else ln[:width] + f"... ({len(ln)} chars)" for ln in text.splitlines()]
    return "\n".join(out[-lines:])


class Invocation(NamedTuple):
    exit_code: int | None
    stdout: str
    stderr: str
    exception: BaseException | None


def _invoke(args) -> Invocation:
    """The real command in-process (``sits_doctor.cli.run``), its output captured and any
    exception kept (``SystemExit`` included: the command returns its code, it never exits)."""
    from sits_doctor.cli import run

    out, err = io.StringIO(), io.StringIO()
    code, exc = None, None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = run(list(args))
        except BaseException as e:  # noqa: BLE001 - every escape is a finding of the fuzzer
            exc = e
    return Invocation(code, out.getvalue(), err.getvalue(), exc)


def _first_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    # a traceback's last line names the exception; otherwise the first line
    if lines and lines[0].startswith("Traceback"):
        return lines[-1][:300]
    return (lines[0] if lines else "")[:300]


def _internal_error_failure(stage: str, err: str) -> Failure:
    # "SITS201 crashed on <plan>: Traceback ...\nValueError: ..."  (debug=True keeps the traceback)
    head, _, rest = err.partition("Traceback")
    last = _first_line("Traceback" + rest) if rest else err.splitlines()[0]
    return Failure(stage, "internal-error", f"{head.strip()} {last}"[:300], _crash_site(err), err)


@contextlib.contextmanager
def _time_limit(seconds: float):
    use_alarm = hasattr(signal, "setitimer") and _in_main_thread()
    if use_alarm:
        def on_alarm(signum, frame):
            raise FuzzTimeout(f"took longer than {seconds} s")
        old = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        if use_alarm:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, old)


def _in_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _maxrss_bytes() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss if sys.platform == "darwin" else rss * 1024


class Workspace:
    """A folder holding copies of the HF models the configs name (``../hf/<model>``), a file that
    must never change, and a fresh ``target/`` folder per input. Changes are found by comparing
    the bytes of every file under the folder before and after."""

    def __init__(self, root: Path):
        self.root = root
        self.reset()

    def reset(self) -> None:
        for child in list(self.root.iterdir()) if self.root.exists() else []:
            shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
        self.root.mkdir(parents=True, exist_ok=True)
        shutil.copytree(FIXTURES / "hf", self.root / "hf")
        (self.root / "outside").mkdir()
        (self.root / "outside" / "serve.yaml").write_text("model: ../hf/qwen2.5-7b-instruct\nswap-space: 4\n")
        self.target = self.root / "target"

    def prepare(self, case: Case) -> Path:
        if self.target.exists() or self.target.is_symlink():
            shutil.rmtree(self.target)
        linked = self.root / "outside" / "linked"
        if linked.exists():
            shutil.rmtree(linked)
        path = self.target / case.name
        path.parent.mkdir(parents=True, exist_ok=True)
        if case.gpu_setting:  # the settings file discovery finds for the input (and for the folder walked)
            (self.target / SETTINGS_FILE).write_text(f'gpu = "{case.gpu_setting}"\n')
        for name, data in case.sidecars:
            side = self.target / name
            side.parent.mkdir(parents=True, exist_ok=True)
            side.write_bytes(data)
        if case.symlink:
            real = linked / Path(case.name).name
            real.parent.mkdir(parents=True)
            real.write_bytes(case.data)
            path.symlink_to(os.path.relpath(real, path.parent))
        else:
            path.write_bytes(case.data)
        return path

    def snapshot(self) -> dict[str, tuple]:
        """Every file and link under the folder: (size, mtime, inode, mode) — a write or a rename
        over a file changes one of them (the fixer's atomic write gives a new inode)."""
        out = {}
        for dirpath, dirnames, filenames in os.walk(self.root):
            for name in dirnames + filenames:
                p = os.path.join(dirpath, name)
                st_ = os.lstat(p)
                out[os.path.relpath(p, self.root)] = (st_.st_size, st_.st_mtime_ns, st_.st_ino, st_.st_mode)
        return out


def _inside_target(rel: str) -> bool:
    """A change fix --apply may make: the target folder (its entries) and files under it, but no
    temporary file left behind."""
    return (rel == "target" or rel.startswith("target" + os.sep)) and not rel.endswith(".sits-doctor-tmp")


def _changes(before: dict, after: dict) -> list[str]:
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


class Harness:
    """Runs one input through check, every format, a dry-run fix and fix --apply, in-process."""

    def __init__(self, root: Path):
        self.ws = Workspace(root)
        self.slowest = (0.0, "")  # the longest single operation: (seconds, stage)

    def run(self, case: Case, cli: bool = False) -> list[Failure]:
        from sits_doctor.engine import CheckOptions

        failures: list[Failure] = []
        path = self.ws.prepare(case)
        # A symlink is checked through its folder: the "checked tree" the fixer keeps writes in.
        # (Named explicitly, a symlink is written through wherever it leads: see REGRESSIONS.)
        rel = "target" if case.symlink and not case.name_the_link else os.path.relpath(path, self.ws.root)
        # a settings file's GPU is found by discovery (so it is not --isolated); otherwise no settings file is read
        opts = CheckOptions(isolated=not case.gpu_setting, debug=True, targets=list(case.targets), gpu=case.gpu_option)
        old_cwd = os.getcwd()
        os.chdir(self.ws.root)
        try:
            before = self.ws.snapshot()
            self._check(rel, opts, failures)
            self._unchanged(before, "check", failures)
            self._fix(rel, opts, case.unsafe, False, failures)
            self._unchanged(before, "fix-dry", failures)
            before_apply = self.ws.snapshot()
            self._fix(rel, opts, case.unsafe, True, failures)
            after = self.ws.snapshot()
            outside = [p for p in _changes(before_apply, after) if not _inside_target(p)]
            if outside:
                failures.append(Failure("fix-apply", "wrote-outside", f"changed outside the target: {outside[:3]}"))
            if cli:
                self.ws.prepare(case)
                self._cli(rel, case, failures)
        finally:
            os.chdir(old_cwd)
        if any(f.what == "wrote-outside" for f in failures):
            self.ws.reset()
        return failures

    def _unchanged(self, before: dict, stage: str, failures: list[Failure]) -> None:
        changed = _changes(before, self.ws.snapshot())
        if changed:
            failures.append(Failure(stage, "wrote-outside", f"{stage} changed files: {changed[:3]}"))

    def _guard(self, stage: str, failures: list[Failure], fn):
        rss = _maxrss_bytes()
        start = time.perf_counter()
        try:
            with _time_limit(TIME_LIMIT_S):
                return fn()
        except FuzzTimeout as exc:
            failures.append(Failure(stage, "timeout", str(exc)))
        except MemoryError:
            failures.append(Failure(stage, "memory", "MemoryError"))
        except Exception as exc:
            tb = traceback.format_exc()
            failures.append(Failure(stage, "exception", f"{type(exc).__name__}: {exc}".splitlines()[0][:300],
                                    _crash_site(tb), tb))
        finally:
            took = time.perf_counter() - start
            if took > self.slowest[0]:
                self.slowest = (took, stage)
            if took >= TIME_LIMIT_S and not any(f.what == "timeout" and f.stage == stage for f in failures):
                failures.append(Failure(stage, "timeout", f"took {took:.1f} s"))
            grew = _maxrss_bytes() - rss
            if grew > MEMORY_LIMIT_BYTES:
                failures.append(Failure(stage, "memory", f"peak memory grew by {grew >> 20} MiB"))
        return None

    def _check(self, rel: str, opts, failures: list[Failure]) -> None:
        from sits_doctor.engine import check
        from sits_doctor.reporters import render
        from sits_doctor.reporters.text import diagnostics

        report = self._guard("check", failures, lambda: check([rel], opts))
        if report is None:
            return
        self._report_ok("check", report, report.exit_code, failures)
        for fmt in FORMATS:
            text = self._guard(f"render:{fmt}", failures, lambda fmt=fmt: render(report, fmt, statistics=fmt == "text"))
            if text is None:
                continue
            self._output_ok(f"render:{fmt}", fmt, text, failures)
        diag = self._guard("render:diagnostics", failures, lambda: diagnostics(report, show_skipped=True))
        if diag and "Traceback" in diag and not report.internal_errors:
            failures.append(Failure("render:diagnostics", "traceback", _first_line(diag)))

    def _fix(self, rel: str, opts, unsafe: bool, apply: bool, failures: list[Failure]) -> None:
        from sits_doctor.fixer import fix_paths
        from sits_doctor.reporters.fix_text import render_fix

        stage = "fix-apply" if apply else "fix-dry"
        result = self._guard(stage, failures, lambda: fix_paths([rel], opts, unsafe=unsafe, apply=apply))
        if result is None:
            return
        code = result.report.exit_code
        if code in (2, 3) or result.errors:
            code = max(code, 2)
        self._report_ok(stage, result.report, code, failures)
        text = self._guard(f"{stage}:render", failures, lambda: render_fix(result, applied=apply, unsafe=unsafe))
        if text and "Traceback" in text:
            failures.append(Failure(f"{stage}:render", "traceback", _first_line(text)))

    @staticmethod
    def _report_ok(stage: str, report, code: int, failures: list[Failure]) -> None:
        for err in report.internal_errors:
            failures.append(_internal_error_failure(stage, err))
        if code not in (0, 1, 2) and not report.internal_errors:
            failures.append(Failure(stage, "exit-code", f"exit code {code}"))

    @staticmethod
    def _output_ok(stage: str, fmt: str, text: str, failures: list[Failure]) -> None:
        if "Traceback (most recent call last)" in text:
            failures.append(Failure(stage, "traceback", _first_line(text)))
        try:
            if fmt in ("json", "sarif"):
                json.loads(text)
            elif fmt == "junit":
                ET.fromstring(text.encode("utf-8"))
        except Exception as exc:
            failures.append(Failure(stage, "malformed-output", f"{fmt}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"))

    def _cli(self, rel: str, case: Case, failures: list[Failure]) -> None:
        """The real command: check in every format (to stdout and with -o), fix and fix --apply."""
        targets = [a for t in case.targets for a in ("--target", t)]
        targets += ["--gpu", case.gpu_option] if case.gpu_option else []
        isolated = () if case.gpu_setting else ("--isolated",)
        runs = [("check", *isolated, "--format", fmt, *targets, rel) for fmt in FORMATS]
        runs += [("check", *isolated, "--format", "sarif", "-o", "report.sarif", "--statistics", *targets, rel),
                 ("fix", *isolated, *targets, *(["--unsafe-fixes"] if case.unsafe else []), rel),
                 ("fix", *isolated, "--apply", *targets, *(["--unsafe-fixes"] if case.unsafe else []), rel)]
        for args in runs:
            stage = (f"cli:{args[0]}" + (f":{args[args.index('--format') + 1]}" if args[0] == "check" else
                                         ":apply" if "--apply" in args else ":dry"))
            before = self.ws.snapshot()
            start = time.perf_counter()
            result = self._guard(stage, failures, lambda args=args: _invoke(args))
            if result is None:
                continue
            took = time.perf_counter() - start
            out = result.stdout + result.stderr
            if result.exception is not None:
                tb = "".join(traceback.format_exception(result.exception))
                failures.append(Failure(stage, "exception", f"{type(result.exception).__name__}: {result.exception}".splitlines()[0][:300],
                                        _crash_site(tb), tb))
            elif result.exit_code not in (0, 1, 2):
                failures.append(Failure(stage, "exit-code", f"exit code {result.exit_code}: {_first_line(result.stderr)}",
                                        detail=out))
            if "Traceback" in out:
                failures.append(Failure(stage, "traceback", _first_line(out[out.index("Traceback"):])))
            if took >= TIME_LIMIT_S:
                failures.append(Failure(stage, "timeout", f"took {took:.1f} s"))
            changed = _changes(before, self.ws.snapshot())
            allowed = ("report.sarif",) if "-o" in args else ()
            if "--apply" in args:
                bad = [p for p in changed if not _inside_target(p)]
            else:
                bad = [p for p in changed if p not in allowed]
            if bad:
                failures.append(Failure(stage, "wrote-outside", f"changed: {bad[:3]}"))
                self.ws.prepare(case)
            if "-o" in args and result.exit_code in (0, 1) and (self.ws.root / "report.sarif").exists():
                self._output_ok(stage, "sarif", (self.ws.root / "report.sarif").read_text(encoding="utf-8"), failures)
            if (self.ws.root / "report.sarif").exists():
                (self.ws.root / "report.sarif").unlink()


@contextlib.contextmanager
def hermetic_env(root: Path):
    """No installed framework picks the target version; the Hugging Face cache is empty."""
    import huggingface_hub.constants

    from sits_doctor import versions

    empty = root / "hf-cache"
    empty.mkdir(parents=True, exist_ok=True)
    saved = (versions.installed, huggingface_hub.constants.HF_HUB_CACHE, os.environ.get("HF_HUB_CACHE"))
    versions.installed = lambda framework: None
    huggingface_hub.constants.HF_HUB_CACHE = str(empty)
    os.environ["HF_HUB_CACHE"] = str(empty)
    try:
        yield
    finally:
        versions.installed, huggingface_hub.constants.HF_HUB_CACHE = saved[0], saved[1]
        if saved[2] is None:
            os.environ.pop("HF_HUB_CACHE", None)
        else:
            os.environ["HF_HUB_CACHE"] = saved[2]


# --- the bounded CI run ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def harness():
    with tempfile.TemporaryDirectory(prefix="sits-fuzz-") as tmp:
        with hermetic_env(Path(tmp)):
            yield Harness(Path(tmp) / "ws")


def assert_holds(harness: Harness, case: Case, cli: bool = False) -> None:
    failures = harness.run(case, cli=cli)
    assert not failures, case.describe() + "\n" + "\n".join(f"{f}\n{_short(f.detail)}" for f in failures)


FUZZ = settings(derandomize=True, deadline=TIME_LIMIT_S * 1000 * 4, database=None, print_blob=True,
                suppress_health_check=list(HealthCheck))


# Regression inputs found by this harness (and bench/fuzz.py); each broke the invariant until fixed.
REGRESSIONS: list = [
    pytest.param(
        Case("gen:vllm", "serve.yaml", b"model: a/" + b"x" * 300 + b"\nmax-model-len: 8192\n"),
        id="model-id-too-long-for-a-cache-folder"),  # was a bug; fixed
    pytest.param(
        Case("gen:vllm", "serve.yaml", b'skip-tokenizer-init: "\\f"\n'),
        id="control-character-in-a-value-breaks-junit"),  # was a bug; fixed
    pytest.param(
        Case("gen:vllm", "serve.yaml", (FIXTURES / "vllm" / "bad_underscore_false.yaml").read_bytes(), unsafe=True,
             symlink=True, name_the_link=True),
        id="fix-apply-writes-through-a-named-symlink-leaving-the-target"),  # was a bug; fixed
    pytest.param(
        Case("mut:vllm/good_llama31_8b_chat.yaml", "good_llama31_8b_chat.yaml",
             b"max-num-batched-tokens: " + b"9" * 4344 + b"\n", symlink=True),
        id="number-past-pythons-int-string-limit"),  # was a bug (bench/results/fuzz-2026-12-01-seed1.md); fixed
    pytest.param(
        Case("mut:kserve/bad_servingruntime_huggingfaceserver.yaml", "bad_servingruntime_huggingfaceserver.yaml",
             b"apiVersion: serving.kserve.io/\nkind: {}", gpu="T4"),
        id="kserve-kind-that-is-a-mapping"),  # was a bug (bench/results/fuzz.md, seed 3); fixed
    pytest.param(
        Case("mut:compose/bad_entrypoint_vllm_serve.yaml", "bad_entrypoint_vllm_serve.yaml",
             (FIXTURES / "compose" / "bad_entrypoint_vllm_serve.yaml").read_bytes().replace(b"\n", b"\r"), unsafe=True),
        id="cr-line-breaks-in-a-later-round-of-fixes"),  # was a bug (IndexError mapping a round-2 finding back); fixed
]


@pytest.mark.parametrize("case", REGRESSIONS or [pytest.param(None, marks=pytest.mark.skip(reason="none found"))])
def test_regressions(harness, case) -> None:
    assert_holds(harness, case)


@settings(FUZZ, max_examples=450)
@given(case=generated_cases())
def test_generated_configs_hold_the_invariant(harness, case: Case) -> None:
    assert_holds(harness, case)


@settings(FUZZ, max_examples=900)
@given(case=mutated_cases())
def test_mutated_fixtures_hold_the_invariant(harness, case: Case) -> None:
    assert_holds(harness, case)


@settings(FUZZ, max_examples=300)
@given(case=number_cases())
def test_number_mutations_with_a_gpu_hold_the_invariant(harness, case: Case) -> None:
    """The numbers of every fixture replaced by typos, words, NaN, infinities and huge ints, with a
    GPU known (so the memory rules compute): no exit 3, no traceback (issue 27 item 5)."""
    assert_holds(harness, case)


def test_number_mutations_reach_every_fixture_and_word() -> None:
    """The number mutator has a number to change in every fixture a deployment is read from, and
    writes each word of its lists (the property test above draws from them)."""
    readable = [p for p in FIXTURES.rglob("*") if p.is_file() and p.suffix in (".json", ".yaml", ".sh")]
    assert len(NUMBER_FIXTURES) >= 0.9 * len(readable)
    data = b"a: 1\nb: '2'\n"
    assert replace_numbers(data, [(0.0, 2)], False) == b"a: .inf\nb: '2'\n"
    assert replace_numbers(data, [(1.0, 1)], False) == b"a: 1\nb: ''\n"  # inside quotes: the empty string
    assert replace_numbers(b'{"a": 4096}', [(0.0, 0)], True) == b'{"a": "abc"}'
    assert replace_numbers(b"vllm==0.10.2 H100 v0.11.0", [(0.0, 0)], False) == b"vllm==0.10.2 H100 v0.11.0"  # no numbers


@settings(FUZZ, max_examples=25)
@given(case=st.one_of(generated_cases(), mutated_cases(), number_cases()))
def test_command_line_holds_the_invariant(harness, case: Case) -> None:
    assert_holds(harness, case, cli=True)


def test_symlink_out_of_the_target_is_never_written(harness) -> None:
    """A fixable file reached through a symlink that leaves the target: fix --apply refuses."""
    data = (FIXTURES / "vllm" / "bad_underscore_false.yaml").read_bytes()
    case = Case("gen:vllm", "serve.yaml", data, unsafe=True, symlink=True)
    assert_holds(harness, case, cli=True)
    assert (harness.ws.root / "outside" / "linked" / "serve.yaml").read_bytes() == data


def test_the_writers_write_what_they_say(harness) -> None:
    """The YAML / JSON writers above produce what the parsers read back (the generators' base)."""
    import yaml

    doc = Map([("a", 1), ("b", Map([("c", [1, "x"])])), ("d", Anchored("x", Map([("e", 2)]))),
               ("f", Map([(MERGE, Alias("x")), ("g", 3)]))])
    assert yaml.safe_load(to_yaml(doc)) == {"a": 1, "b": {"c": [1, "x"]}, "d": {"e": 2}, "f": {"e": 2, "g": 3}}
    assert yaml.safe_load(to_yaml(doc, flow=True)) == yaml.safe_load(to_yaml(doc))
    assert json.loads(to_json(doc)) == {"a": 1, "b": {"c": [1, "x"]}, "d": {"e": 2}, "f": {"g": 3}}
