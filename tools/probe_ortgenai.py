"""Run fixed ``genai_config.json`` probes through real ONNX Runtime GenAI wheels, one per version.

What the repo's hand-written schema (``sits_doctor/schemas/ortgenai.py``) claims about ORT GenAI's
config parser is checked here against the parser itself. Each probe below is a small but
realistic config (a one-layer llama-type decoder on the CPU) with one thing changed. Every
installed version runs every probe in a subprocess of its own virtual environment:

- ``stage: "config"`` probes only construct ``onnxruntime_genai.Config(folder)``, which reads and
  validates ``genai_config.json`` (the model file is not opened until ``Model`` creation);
- ``stage: "model"`` probes are accepted by the parser but may fail later, so they also build
  ``Model(config)`` (and ``Engine(model)`` when the config has an ``engine`` section and the
  wheel has the Engine API), ``GeneratorParams``/``Generator``, feed three tokens per batch row
  and run one step. For them the folder gets a tiny ONNX decoder (written here with a
  hand-rolled protobuf encoder: Gather for the logits, Concat for the KV cache), so no ``onnx``
  package and no download is needed. A failure records the step it happened in (``config``,
  ``model``, ``engine``, ``generator``, ``run``; ``crash`` when the process died, e.g. on an
  abort inside the library).

The result is committed as ``sits_doctor/frameworks/data/ortgenai_probes.json``: for each probe,
runs of consecutive versions with the same outcome (``ok`` and the exact error text);
``tests/test_ortgenai_probes.py`` compares every release's verdicts with the schema built for it.

With ``--keys`` the tool instead adds each key of the newest schema (sits_doctor/schemas/ortgenai.py)
to the base config, one at a time, and reads it with every release's parser in one process per
release (a config that kills it costs only itself); a release knows the key unless its parser
answers ``Unknown value``. That is ``sits_doctor/frameworks/data/ortgenai_keys.json``, from which
``schema_for(release)`` drops what each release does not know.

Releases 0.3 and 0.4 have no ``og.Config``: there ``og.Model(folder)`` reads the config, with the
tiny decoder beside it. Their CPU wheels also apply the providers at load ("CUDA execution provider
is not enabled in this build"), which the probe test lists as a build's limit, not the parser's.

Set up (outside the repo, one venv per version; CPU wheels from PyPI; 0.3.0 needs numpy added) and
run from the repo root::

    for v in 0.3.0 0.4.0 0.5.0 0.5.1 0.5.2 0.6.0 0.7.0 0.7.1 0.8.0 0.8.1 0.8.2 0.8.3 0.9.0 0.9.1 \
             0.9.2 0.10.0 0.11.0 0.11.1 0.11.2 0.11.3 0.11.4 0.12.0 0.12.1 0.12.2 0.13.0 0.13.1 \
             0.13.2 0.14.0 0.14.1 0.15.0 0.15.1 0.15.2 0.16.0 0.17.0 0.17.1 0.18.0; do
        python3.11 -m venv /work/oga_venvs/$v && /work/oga_venvs/$v/bin/pip install onnxruntime-genai==$v numpy
    done
    PYTHONPATH=. python tools/probe_ortgenai.py --venvs /work/oga_venvs > sits_doctor/frameworks/data/ortgenai_probes.json
    PYTHONPATH=. python tools/probe_ortgenai.py --venvs /work/oga_venvs --keys > sits_doctor/frameworks/data/ortgenai_keys.json

A version whose venv cannot import ``onnxruntime_genai`` (or imports another version) is listed
under ``failed`` with the reason and left out of ``versions``. On two busy cores the probes take
about 20 minutes for the 36 releases, the keys 15 seconds.
"""

from __future__ import annotations

import argparse
import copy
import json
import struct
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from packaging.version import Version

# --------------------------------------------------------------------------------------------
# The probes
# --------------------------------------------------------------------------------------------
LAYERS, HEADS, HEAD_SIZE, VOCAB = 1, 2, 4, 32

BASE: dict = {
    "model": {
        "type": "llama",
        "context_length": 256,
        "vocab_size": VOCAB,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 0,
        "decoder": {
            "filename": "model.onnx",
            "session_options": {"log_id": "onnxruntime-genai", "provider_options": []},
            "head_size": HEAD_SIZE,
            "hidden_size": HEADS * HEAD_SIZE,
            "num_attention_heads": HEADS,
            "num_key_value_heads": HEADS,
            "num_hidden_layers": LAYERS,
            "inputs": {
                "input_ids": "input_ids",
                "attention_mask": "attention_mask",
                "past_key_names": "past_key_values.%d.key",
                "past_value_names": "past_key_values.%d.value",
            },
            "outputs": {
                "logits": "logits",
                "present_key_names": "present.%d.key",
                "present_value_names": "present.%d.value",
            },
        },
    },
    "search": {"max_length": 64, "do_sample": False, "num_beams": 1},
}

CUDA = [{"cuda": {"enable_cuda_graph": "0"}}]


def _probe(name: str, edit, stage: str = "config", note: str = "") -> dict:
    config = copy.deepcopy(BASE)
    result = edit(config)
    return {"name": name, "stage": stage, "note": note, "config": config if result is None else result}


def _set(path: str, value):
    """An edit that sets (or, with value DELETE, removes) the key at a "/"-separated path."""

    def edit(config):
        *parents, last = path.split("/")
        node = config
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        if value is DELETE:
            del node[last]
        else:
            node[last] = copy.deepcopy(value)

    return edit


def _both(*edits):
    def edit(config):
        for e in edits:
            e(config)

    return edit


DELETE = object()
PIPELINE_V2: dict = {
    "version": 2,
    "pipeline": {"extends": "autoregressive-decoder", "sessions": {"decoder": "model.onnx"},
                 "state": {"kv_cache": {"past": "past_key_values.%d.key"}}},
    "tokens": {"bos": 1, "eos": 2, "pad": 0},
    "generation": {"max_length": 64},
}
SO = "model/decoder/session_options"

PROBES: list[dict] = [
    _probe("baseline", lambda c: None, "model", "the unchanged base config: loads and runs one step"),
    _probe("baseline_config", lambda c: None, note="the unchanged base config, parser only"),
    # unknown keys at each level
    _probe("unknown_top_object", _set("runtime", {"threads": 4}), note="unknown top-level object"),
    _probe("unknown_top_array", _set("adapters", ["a"]), note="unknown top-level array"),
    _probe("unknown_top_scalar", _set("max_length", 2048), note="unknown top-level number"),
    _probe("unknown_top_scalar_string", _set("version", "1.0"), note="unknown top-level string"),
    _probe("unknown_top_scalar_bool", _set("enable_cuda_graphs", True), note="unknown top-level bool"),
    _probe("top_level_not_object", lambda c: [c], note="the document is an array, not an object"),
    _probe("unknown_key_model", _set("model/kv_cache_dtype", "fp8")),
    _probe("unknown_key_decoder", _set("model/decoder/kv_cache_dtype", "fp8")),
    _probe("unknown_key_decoder_inputs", _set("model/decoder/inputs/cache_position", "cache_position")),
    _probe("unknown_key_decoder_outputs", _set("model/decoder/outputs/hidden", "hidden")),
    _probe("unknown_key_search", _set("search/enable_cuda_graphs", True)),
    _probe("unknown_key_search_string", _set("search/sampler", "greedy")),
    _probe("unknown_object_in_model", _set("model/adapter", {"filename": "a.onnx"})),
    _probe("unknown_key_sliding_window", _set("model/decoder/sliding_window", {"window_size": 16, "foo": 1})),
    _probe("unknown_key_engine", _set("engine", {"paged": True})),
    _probe("unknown_key_dynamic_batching", _set("engine", {"dynamic_batching": {"block_size": 16, "num_blocks": 8, "foo": 1}})),
    _probe("speculative_section", _set("speculative", {"max_draft_tokens": 4}), note="newer top-level section"),
    # session options
    _probe("session_option_unknown_string", _set(f"{SO}/intra_op_num_thread", "4"),
           note="typo of intra_op_num_threads, as a string"),
    _probe("session_option_unknown_number", _set(f"{SO}/intra_op_num_thread", 4),
           note="typo of intra_op_num_threads, as a number"),
    _probe("session_option_unknown_bool", _set(f"{SO}/enable_foo", True)),
    _probe("session_option_ort_entry", _set(f"{SO}/session.intra_op.allow_spinning", "0"),
           note="a real ORT session config entry"),
    _probe("session_option_unknown_string_model", _set(f"{SO}/intra_op_num_thread", "4"), "model",
           note="the typo, through Model creation (passed to AddConfigEntry)"),
    _probe("session_option_threads_number", _set(f"{SO}/intra_op_num_threads", 4)),
    _probe("session_option_threads_string", _set(f"{SO}/intra_op_num_threads", "4")),
    _probe("session_option_threads_float", _set(f"{SO}/intra_op_num_threads", 4.5)),
    _probe("session_option_mem_arena_string", _set(f"{SO}/enable_cpu_mem_arena", "true")),
    _probe("graph_optimization_level_ok", _set(f"{SO}/graph_optimization_level", "ORT_ENABLE_ALL")),
    _probe("graph_optimization_level_misspelt", _set(f"{SO}/graph_optimization_level", "ORT_ENABLE_ALLL")),
    _probe("graph_optimization_level_number", _set(f"{SO}/graph_optimization_level", 99)),
    # provider options
    _probe("provider_cuda_string", _set(f"{SO}/provider_options", CUDA)),
    _probe("provider_cuda_graph_string_1", _set(f"{SO}/provider_options", [{"cuda": {"enable_cuda_graph": "1"}}]),
           note='enable_cuda_graph: "1" on CUDA (parser only: these are CPU wheels)'),
    _probe("provider_cuda_bool", _set(f"{SO}/provider_options", [{"cuda": {"enable_cuda_graph": True}}])),
    _probe("provider_cuda_number", _set(f"{SO}/provider_options", [{"cuda": {"enable_cuda_graph": 1}}])),
    _probe("provider_cuda_null", _set(f"{SO}/provider_options", [{"cuda": {"enable_cuda_graph": None}}])),
    _probe("provider_cuda_unknown_option", _set(f"{SO}/provider_options", [{"cuda": {"enable_cuda_graphs": "1"}}]),
           note="misspelt provider option, as a string"),
    _probe("provider_options_object", _set(f"{SO}/provider_options", {"cuda": {"enable_cuda_graph": "0"}}),
           note="provider_options as an object instead of an array"),
    _probe("provider_unknown_name", _set(f"{SO}/provider_options", [{"tpu": {}}])),
    # integer fields
    _probe("context_length_float", _set("model/context_length", 4096.5)),
    _probe("context_length_integral_float", _set("model/context_length", 256.0)),
    _probe("context_length_string", _set("model/context_length", "8")),
    _probe("context_length_null", _set("model/context_length", None)),
    _probe("context_length_missing", _set("model/context_length", DELETE)),
    _probe("context_length_zero", _set("model/context_length", 0)),
    _probe("max_length_float", _set("search/max_length", 4096.5)),
    _probe("max_length_string", _set("search/max_length", "8")),
    _probe("max_length_null", _set("search/max_length", None)),
    _probe("max_length_negative", _set("search/max_length", -1)),
    _probe("hidden_size_string", _set("model/decoder/hidden_size", "8")),
    _probe("eos_token_id_array", _set("model/eos_token_id", [2, 3])),
    _probe("eos_token_id_string", _set("model/eos_token_id", "2")),
    # numbers and booleans in search
    _probe("top_p_string", _set("search/top_p", "0.9")),
    _probe("temperature_int", _set("search/temperature", 1)),
    _probe("do_sample_string", _set("search/do_sample", "true")),
    _probe("do_sample_number", _set("search/do_sample", 1)),
    _probe("past_present_share_buffer_true", _set("search/past_present_share_buffer", True)),
    # batch size and lengths
    _probe("batch_size_32", _set("search/batch_size", 32), "model"),
    _probe("batch_size_64", _set("search/batch_size", 64), "model"),
    _probe("batch_size_64_config", _set("search/batch_size", 64)),
    _probe("batch_size_0", _set("search/batch_size", 0), "model"),
    _probe("max_length_over_context", _set("search/max_length", 512), "model",
           note="search.max_length 512 > model.context_length 256"),
    _probe("max_length_over_context_config", _set("search/max_length", 512)),
    _probe("num_beams_2", _set("search/num_beams", 2), "model"),
    # the paged engine
    _probe("dynamic_batching_no_blocks", _set("engine", {"dynamic_batching": {"block_size": 16, "max_batch_size": 4}}),
           "model", note="engine.dynamic_batching without num_blocks / gpu_utilization_factor"),
    _probe("dynamic_batching_no_blocks_config", _set("engine", {"dynamic_batching": {"block_size": 16, "max_batch_size": 4}})),
    _probe("dynamic_batching_num_blocks", _set("engine", {"dynamic_batching": {"block_size": 16, "num_blocks": 8}})),
    _probe("dynamic_batching_gpu_factor_string", _set("engine", {"dynamic_batching": {"gpu_utilization_factor": "0.5"}})),
    _probe("static_batching", _set("engine", {"static_batching": {"max_batch_size": 4}})),
    # the "version": 2 pipeline form proposed in microsoft/onnxruntime-genai#2114
    _probe("pipeline_v2", lambda c: copy.deepcopy(PIPELINE_V2), note='a "version": 2 config: pipeline, tokens and generation sections'),
    _probe("pipeline_v2_beside_model", _both(_set("version", 2), _set("pipeline", PIPELINE_V2["pipeline"])),
           note='the base config with "version": 2 and a top-level pipeline section'),
    _probe("version_2_scalar", _set("version", 2), note='the base config with "version": 2 and nothing else new'),
]
assert len({p["name"] for p in PROBES}) == len(PROBES)

# --------------------------------------------------------------------------------------------
# A tiny ONNX decoder, written with a minimal protobuf encoder (no onnx package needed)
# --------------------------------------------------------------------------------------------
FLOAT, INT64 = 1, 7


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _int(field: int, n: int) -> bytes:
    return _key(field, 0) + _varint(n)


def _bytes(field: int, data: bytes | str) -> bytes:
    data = data.encode() if isinstance(data, str) else data
    return _key(field, 2) + _varint(len(data)) + data


def _tensor(name: str, dtype: int, dims: list[int], raw: bytes) -> bytes:
    return b"".join(_int(1, d) for d in dims) + _int(2, dtype) + _bytes(8, name) + _bytes(9, raw)


def _value_info(name: str, dtype: int, dims: list) -> bytes:
    shape = b"".join(_bytes(1, _int(1, d) if isinstance(d, int) else _bytes(2, d)) for d in dims)
    return _bytes(1, name) + _bytes(2, _bytes(1, _int(1, dtype) + _bytes(2, shape)))


def _node(op: str, inputs: list[str], outputs: list[str], name: str, **attrs: int) -> bytes:
    body = b"".join(_bytes(1, i) for i in inputs) + b"".join(_bytes(2, o) for o in outputs)
    body += _bytes(3, name) + _bytes(4, op)
    for key, value in attrs.items():  # AttributeProto: name=1, i=3, type=20 (INT=2)
        body += _bytes(5, _bytes(1, key) + _int(3, value) + _int(20, 2))
    return body


def tiny_decoder() -> bytes:
    """logits = Gather(table, input_ids); present.k/v = Concat(past, input_ids as [B, H, S, D])."""
    nodes, inits = [], []
    table = b"".join(struct.pack("<f", float((r * 7 + c) % 5)) for r in range(VOCAB) for c in range(VOCAB))
    inits.append(_tensor("table", FLOAT, [VOCAB, VOCAB], table))
    inits.append(_tensor("ones", FLOAT, [1, HEADS, 1, HEAD_SIZE], struct.pack("<f", 1.0) * HEADS * HEAD_SIZE))
    inits.append(_tensor("axes", INT64, [2], struct.pack("<qq", 1, 3)))
    nodes.append(_node("Gather", ["table", "input_ids"], ["logits"], "gather", axis=0))
    nodes.append(_node("Cast", ["input_ids"], ["ids_f"], "cast", to=FLOAT))
    nodes.append(_node("Unsqueeze", ["ids_f", "axes"], ["ids_4d"], "unsqueeze"))
    nodes.append(_node("Mul", ["ids_4d", "ones"], ["new_kv"], "mul"))
    inputs = [_value_info("input_ids", INT64, ["batch", "seq"]),
              _value_info("attention_mask", INT64, ["batch", "total"])]
    outputs = [_value_info("logits", FLOAT, ["batch", "seq", VOCAB])]
    for layer in range(LAYERS):
        for kind in ("key", "value"):
            past, present = f"past_key_values.{layer}.{kind}", f"present.{layer}.{kind}"
            inputs.append(_value_info(past, FLOAT, ["batch", HEADS, "past", HEAD_SIZE]))
            outputs.append(_value_info(present, FLOAT, ["batch", HEADS, "total", HEAD_SIZE]))
            nodes.append(_node("Concat", [past, "new_kv"], [present], f"concat_{layer}_{kind}", axis=2))
    graph = b"".join(_bytes(1, n) for n in nodes) + _bytes(2, "tiny") + b"".join(_bytes(5, t) for t in inits)
    graph += b"".join(_bytes(11, v) for v in inputs) + b"".join(_bytes(12, v) for v in outputs)
    opset = _bytes(1, "") + _int(2, 17)
    return _int(1, 8) + _bytes(2, "sits-doctor probe") + _bytes(7, graph) + _bytes(8, opset)


# --------------------------------------------------------------------------------------------
# The worker: runs inside one version's venv, reads probes on stdin, prints results as JSON
# --------------------------------------------------------------------------------------------
WORKER = r'''
import json, os, sys, tempfile
import numpy as np
import onnxruntime_genai as og

def run(folder, probe):
    step = "config"
    try:
        if not hasattr(og, "Config"):  # 0.3/0.4: Model(folder) reads the config, then the model
            model = og.Model(folder)
            if probe["stage"] == "config":
                return {"ok": True, "error": None, "stage": None}
        else:
            config = og.Config(folder)
            if probe["stage"] == "config":
                return {"ok": True, "error": None, "stage": None}
            step = "model"
            model = og.Model(config)
        if "engine" in probe["config"] and hasattr(og, "Engine"):
            step = "engine"
            og.Engine(model)  # the paged engine sizes its KV cache here
        step = "generator"
        params = og.GeneratorParams(model)
        batch = probe["config"].get("search", {}).get("batch_size", 1)
        tokens = np.array([[3, 4, 5]] * max(1, min(batch, 64)), dtype=np.int32)
        if not hasattr(og.Generator, "append_tokens"):
            params.input_ids = tokens  # the 0.5/0.6 API: the prompt goes in with the params
        generator = og.Generator(model, params)
        step = "run"
        if hasattr(generator, "append_tokens"):
            generator.append_tokens(tokens)
        else:
            generator.compute_logits()
        generator.generate_next_token()
        return {"ok": True, "error": None, "stage": None}
    except Exception as exc:
        return {"ok": False, "error": str(exc).strip().replace(folder, "<folder>"), "stage": step}

probe = json.load(sys.stdin)
with tempfile.TemporaryDirectory() as folder:
    with open(os.path.join(folder, "genai_config.json"), "w") as f:
        json.dump(probe["config"], f)
    if probe["stage"] == "model" or not hasattr(og, "Config"):
        with open(os.path.join(folder, "model.onnx"), "wb") as f:
            f.write(bytes.fromhex(probe["model"]))
    result = run(folder, probe)
print(json.dumps({"version": og.__version__, **result}))
'''


# --------------------------------------------------------------------------------------------
# Key probes: which of the newest schema's keys each release's parser knows
# --------------------------------------------------------------------------------------------
def key_paths(schema: dict | None = None, path: tuple = ()) -> list[tuple[tuple[str, ...], dict]]:
    """Every named key of the schema (sits_doctor/schemas/ortgenai.py), depth first, with its schema."""
    if schema is None:
        from sits_doctor.schemas.ortgenai import ROOT

        schema = ROOT
    out = []
    for name, sub in schema.get("properties", {}).items():
        out.append((path + (name,), sub))
        out.extend(key_paths(sub, path + (name,)))
    return out


def sample_value(schema: dict):
    """A value of the key's own type, so that a release that knows the key accepts it."""
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    if kind == "array":
        item = schema.get("items", {})
        return [sample_value(item)] if item.get("type") in ("string", "integer", "number") else []
    return {"string": "x", "integer": 1, "number": 0.5, "boolean": False, "object": {}}.get(kind, "x")


def key_probe(path: tuple[str, ...], schema: dict) -> dict:
    """BASE with the one key added (sections on the way created empty); a key BASE has keeps its value."""
    config = copy.deepcopy(BASE)
    node = config
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node.setdefault(path[-1], sample_value(schema))
    return config


KEY_WORKER = r"""
import json, os, sys, tempfile
import onnxruntime_genai as og

job = json.load(sys.stdin)
with tempfile.TemporaryDirectory() as folder:
    os.chdir(folder)  # enable_profiling writes its trace to the working directory
    if not hasattr(og, "Config"):  # 0.3/0.4 read the config in Model(folder)
        with open(os.path.join(folder, "model.onnx"), "wb") as f:
            f.write(bytes.fromhex(job["model"]))
    for config in job["configs"]:
        with open(os.path.join(folder, "genai_config.json"), "w") as f:
            json.dump(config, f)
        try:
            og.Config(folder) if hasattr(og, "Config") else og.Model(folder)
            error = None
        except Exception as exc:
            error = str(exc).strip().replace(folder, "<folder>")
        print(json.dumps(error), flush=True)  # one line per config: a crash loses only the one it died on
"""


def run_keys(python: Path, configs: list[dict], model_hex: str, timeout: int) -> list[str | None]:
    """Every config through one release's parser; a config that kills the process is recorded as a
    crash and the rest run in a fresh process."""
    errors: list[str | None] = []
    while len(errors) < len(configs):
        rest = configs[len(errors):]
        try:
            proc = subprocess.run([str(python), "-c", KEY_WORKER], input=json.dumps({"configs": rest, "model": model_hex}),
                                  capture_output=True, text=True, timeout=timeout * 10)
            lines, code, tail = proc.stdout.splitlines(), proc.returncode, proc.stderr.strip().splitlines()[-1:]
        except subprocess.TimeoutExpired as exc:
            lines, code, tail = (exc.stdout or b"").decode().splitlines(), "timeout", [""]
        errors.extend(json.loads(line) for line in lines)
        if len(errors) < len(configs):
            errors.append(f"crash: worker exited {code}: {(tail or [''])[0][-300:]}")
    return errors


def knows(error: str | None) -> bool:
    """A release knows a key unless its parser names it (or a section above it) an unknown value."""
    return error is None or "unknown value" not in error.lower()


def probe_keys(pythons: dict[str, Path], model_hex: str, timeout: int) -> dict:
    """Each key in every release, one process per release; runs of releases with the same verdict."""
    keys = key_paths()
    configs = [key_probe(path, schema) for path, schema in keys]
    verdicts: dict[str, dict[str, dict]] = {}
    for version, python in pythons.items():
        errors = run_keys(python, configs, model_hex, timeout)
        verdicts[version] = {".".join(path): {"ok": "crash" if (err or "").startswith("crash") else knows(err),
                                              "error": None, "stage": None}
                             for (path, _), err in zip(keys, errors)}
        unknown = sum(not v["ok"] for v in verdicts[version].values())
        print(f"{version}: {unknown}/{len(keys)} keys unknown", file=sys.stderr)
    versions = list(pythons)
    return {
        "generator": "tools/probe_ortgenai.py --keys",
        "about": "for every key of sits_doctor/schemas/ortgenai.py, the base probe config with that key added "
                 "(a value of its type) read by each onnxruntime-genai CPU wheel's own config parser "
                 "(og.Config(folder); og.Model(folder) for 0.3/0.4, which have no Config); 'ok' false: the "
                 "parser answered 'Unknown value' (the key, or a section above it, is not known to that release); "
                 "'crash': the parser knows the key but the process died reading it",
        "versions": versions,
        "keys": {".".join(path): [[s["first"], s["last"], s["ok"]] for s in
                                  segments(versions, {v: verdicts[v][".".join(path)] for v in versions})]
                 for path, _ in keys},
    }


def run_probe(python: Path, probe: dict, model_hex: str, timeout: int) -> dict:
    """One probe in a fresh interpreter of one version's venv (a crash costs only that probe)."""
    payload = {"stage": probe["stage"], "config": probe["config"], "model": model_hex}
    try:
        proc = subprocess.run([str(python), "-c", WORKER], input=json.dumps(payload),
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"version": None, "ok": False, "error": f"timed out after {timeout} s", "stage": "crash"}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = proc.stderr.strip().splitlines()[-1:] or [""]
        return {"version": None, "ok": False, "stage": "crash",
                "error": f"worker exited {proc.returncode}: {tail[0][-300:]}"}
    return json.loads(lines[-1])


def segments(versions: list[str], outcome: dict[str, dict]) -> list[dict]:
    """Runs of consecutive versions with the same outcome (first/last inclusive)."""
    runs: list[dict] = []
    for v in versions:
        r = outcome[v]
        key = {"ok": r["ok"], "error": r["error"], "stage": r["stage"]}
        if runs and all(runs[-1][k] == key[k] for k in key):
            runs[-1]["last"] = v
        else:
            runs.append({"first": v, "last": v, **key})
    return runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--venvs", type=Path, default=Path("/work/oga_venvs"),
                    help="folder of one venv per version, named by the version")
    ap.add_argument("--timeout", type=int, default=120, help="seconds for one probe")
    ap.add_argument("--jobs", type=int, default=2, help="probes run at once")
    ap.add_argument("--keys", action="store_true",
                    help="probe which schema keys each release knows (ortgenai_keys.json) instead of PROBES")
    args = ap.parse_args()
    model_hex = tiny_decoder().hex()
    found = sorted((d for d in args.venvs.iterdir() if (d / "bin" / "python").exists()),
                   key=lambda d: Version(d.name))
    pythons: dict[str, Path] = {}
    failed: dict[str, str] = {}
    for venv in found:
        python = venv / "bin" / "python"
        check = subprocess.run([str(python), "-c", "import onnxruntime_genai as og; print(og.__version__)"],
                               capture_output=True, text=True)
        if check.returncode != 0:
            failed[venv.name] = "cannot import onnxruntime_genai: " + (check.stderr.strip().splitlines() or [""])[-1]
        elif check.stdout.strip() != venv.name:
            failed[venv.name] = f"the venv imports onnxruntime_genai {check.stdout.strip()}"
        else:
            pythons[venv.name] = python
    if args.keys:
        json.dump({**probe_keys(pythons, model_hex, args.timeout), "failed": failed}, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return
    results: dict[str, dict] = {}
    for version, python in pythons.items():
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            outcomes = pool.map(lambda p: run_probe(python, p, model_hex, args.timeout), PROBES)
            got = {p["name"]: r for p, r in zip(PROBES, outcomes)}
        results[version] = got
        print(f"{version}: {sum(r['ok'] for r in got.values())}/{len(PROBES)} accepted", file=sys.stderr)
    versions = list(results)
    out = {
        "generator": "tools/probe_ortgenai.py",
        "about": "onnxruntime-genai CPU wheels from PyPI, one probe per fresh process; stage 'config' "
                 "probes construct og.Config(folder) only (og.Model(folder) with the tiny decoder on 0.3/0.4, "
                 "which have no Config), stage 'model' probes also build Model (and "
                 "Engine for an engine section) and Generator on a tiny generated ONNX decoder and run "
                 "one step; a failed result's 'stage' says where it failed ('crash': the process died)",
        "versions": versions,
        "failed": failed,
        "probes": {
            p["name"]: {
                "stage": p["stage"],
                **({"note": p["note"]} if p["note"] else {}),
                "config": p["config"],
                "results": segments(versions, {v: results[v][p["name"]] for v in versions}),
            }
            for p in PROBES
        },
    }
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
