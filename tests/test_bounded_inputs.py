"""Every input is bounded in time and memory before it is read or built upon.

Issue 27 #4 (the ``fix`` diff part is tested with the fixer). Each run happens in its own
interpreter with its address space capped and a timeout, so a run that would take the machine's
memory fails with MemoryError (exit 3) or is stopped, instead of taking the suite down with it:

- a model config's numbers are validated before anything is built per layer;
- ``--config``, ``--baseline``, settings, ignore and ``pyproject.toml`` files are read as checked
  files are: regular files only, never a blocking read, never more than the size limit;
- a JSON document has a cap on its values, as YAML has on its nodes;
- YAML merges and keys cannot expand a small file exponentially.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES

MEMORY_CAP = 1 << 30  # address space of each run: ample for any check, far below what the bugs took
TIMEOUT_S = 60
SERVE = "model: sits-doctor-test/not-a-cached-model\nswap-space: 4\n"  # one SITS204 finding at 2:1


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``sits-doctor ARGS`` in its own interpreter, its memory capped, under a timeout."""
    env = {**os.environ, "HF_HUB_CACHE": str(cwd / ".hf-cache")}
    try:
        done = subprocess.run([sys.executable, "-m", "sits_doctor", *args], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=TIMEOUT_S, preexec_fn=_capped)
    except subprocess.TimeoutExpired:
        pytest.fail(f"sits-doctor {' '.join(args)}: still running after {TIMEOUT_S} s")
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    return done


def sparse(path: Path, size: int) -> Path:
    """A file that says it is ``size`` bytes long and takes no disk."""
    with open(path, "wb") as fh:
        fh.truncate(size)
    return path


# --- model numbers --------------------------------------------------------------------------------


def _gemma2(tmp_path: Path, **changes) -> Path:
    config = json.loads((FIXTURES / "hf" / "gemma-2-2b-it" / "config.json").read_text())
    config.update(changes)
    folder = tmp_path / "gemma"
    folder.mkdir()
    text = json.dumps(config, indent=2)
    (folder / "config.json").write_text(text)
    (tmp_path / "serve.yaml").write_text("model: ./gemma\nmax-model-len: 4096\n")
    return folder / "config.json"


@pytest.mark.parametrize("layers", [10**9, 10**20, 100_001])
def test_a_layer_count_no_model_has_is_refused_before_any_list_is_built(tmp_path: Path, layers: int) -> None:
    """A 1 KB Gemma-2 config (layer types from a pattern, one per layer) with 10^9 layers built
    a 24 GiB list before the config was found invalid."""
    config = _gemma2(tmp_path, num_hidden_layers=layers)
    line = next(n for n, text in enumerate(config.read_text().splitlines(), 1) if "num_hidden_layers" in text)
    done = run("check", "serve.yaml", "--gpu", "H100", "--target", "vllm==0.11.0", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"gemma/config.json:{line}:3: error: invalid model config: num_hidden_layers is {layers}; " in done.stderr


@pytest.mark.parametrize("key", ["hidden_size", "num_attention_heads", "vocab_size", "head_dim",
                                 "intermediate_size", "max_position_embeddings"])
def test_a_number_past_float_range_is_an_invalid_config_not_a_crash(tmp_path: Path, key: str) -> None:
    """A 400-digit integer overflowed ``float()`` in the model's arithmetic (exit 3)."""
    _gemma2(tmp_path, **{key: 10**400})
    done = run("check", "serve.yaml", "--gpu", "H100", "--target", "vllm==0.11.0", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"invalid model config: {key} is 1000000" in done.stderr


def test_the_largest_real_numbers_still_pass(tmp_path: Path) -> None:
    """The bounds leave every real model alone: 10M positions (Llama 4 Scout), 256k vocab, and
    transformers' own "no limit" model_max_length."""
    _gemma2(tmp_path, max_position_embeddings=10_485_760, num_hidden_layers=126, model_max_length=int(1e30))
    done = run("check", "serve.yaml", "--gpu", "H100", "--target", "vllm==0.11.0", cwd=tmp_path)
    assert "invalid model config" not in done.stderr, done.stderr
    assert done.returncode in (0, 1), done.stderr


# --- every input file read the same guarded way ---------------------------------------------------------


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


NAMED = {  # option -> file name it is given as
    "--config": ".sits-doctor.toml",
    "--baseline": "baseline.json",
}


@pytest.mark.parametrize("option", sorted(NAMED))
@pytest.mark.parametrize("kind", ["fifo", "device", "sparse"])
def test_a_named_settings_or_baseline_file_is_read_as_a_checked_file_is(tmp_path: Path, option: str, kind: str) -> None:
    """A FIFO hung the run, /dev/zero read until MemoryError (exit 3), a sparse 1 GiB file was read whole."""
    (tmp_path / "serve.yaml").write_text(SERVE)
    path = tmp_path / NAMED[option]
    if kind == "fifo":
        given = str(_fifo(path))
    elif kind == "device":
        given = "/dev/zero"
    else:
        given = str(sparse(path, 1 << 30))
    done = run("check", "serve.yaml", option, given, "--target", "vllm==0.20.0", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    reason = {"fifo": "cannot read: a named pipe (FIFO), not a", "device": "cannot read: a device, not a",
              "sparse": "file is 1024.0 MiB, over the 10 MiB limit for a"}[kind]
    assert reason in done.stderr, done.stderr


@pytest.mark.parametrize("name", [".sits-doctor.toml", "pyproject.toml", ".sits-doctor-ignore.toml"])
def test_a_discovered_settings_or_ignore_file_is_read_within_the_limit(tmp_path: Path, name: str) -> None:
    """A sparse 1 GiB pyproject.toml (or settings, or ignore file) beside the checked file was read
    whole (1 GiB of memory; MemoryError under the cap)."""
    (tmp_path / "serve.yaml").write_text(SERVE)
    sparse(tmp_path / name, 1 << 30)
    done = run("check", "serve.yaml", "--target", "vllm==0.20.0", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"{name}: error: file is 1024.0 MiB, over the 10 MiB limit for a" in done.stderr, done.stderr


# --- JSON values capped as YAML nodes are ---------------------------------------------------------------


def test_a_json_array_of_millions_of_values_is_refused_at_the_cap(tmp_path: Path) -> None:
    """10 MiB of ``[0,0,...]`` (5 M values) took over a minute and over 3 GiB."""
    from sits_doctor.source import MAX_NODES

    text = "[" + ",".join(["0"] * 5_000_000) + "]\n"
    (tmp_path / "config.json").write_text(text)
    done = run("check", "config.json", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    col = len("[0") + 2 * (MAX_NODES - 1) + 1  # the comma that passes the cap
    assert f"config.json:1:{col}: error: more than {MAX_NODES} values in one document" in done.stderr, done.stderr


def test_a_json_config_below_the_cap_is_read(tmp_path: Path) -> None:
    config = json.loads((FIXTURES / "hf" / "gemma-2-2b-it" / "config.json").read_text())
    config["extra"] = list(range(10_000))
    (tmp_path / "config.json").write_text(json.dumps(config))
    done = run("check", "config.json", cwd=tmp_path)
    assert done.returncode in (0, 1), done.stderr


# --- YAML that expands without aliases being counted ------------------------------------------------------


def _doubling(count: int) -> list[str]:
    """Anchors each merging the one before it twice: 2^count pairs once flattened."""
    out = ["&a0 {x: 1}"]
    out += [f"&a{k} {{<<: [*a{k - 1}, *a{k - 1}]}}" for k in range(1, count)]
    return out


def test_doubling_merges_are_an_alias_bomb(tmp_path: Path) -> None:
    """1 KB of merges inside a merge list: each level flattened again, 2^40 pairs (a hang)."""
    text = "<<: [" + ", ".join(_doubling(40)) + "]\nmodel: m\nmax-model-len: 1\n"
    assert len(text) < 1100
    (tmp_path / "serve.yaml").write_text(text)
    done = run("check", "serve.yaml", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "serve.yaml:1:" in done.stderr and "(YAML alias bomb?); refusing" in done.stderr, done.stderr


def test_a_mapping_as_a_key_is_refused_as_pyyaml_refuses_it(tmp_path: Path) -> None:
    """A key that is a list of doubling merges: its text was the repr of the whole node tree."""
    text = "? [" + ", ".join(_doubling(40)) + "]\n: 1\nmodel: m\n"
    (tmp_path / "serve.yaml").write_text(text)
    done = run("check", "serve.yaml", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "serve.yaml:1:3: error: a list or mapping as a key" in done.stderr, done.stderr


def test_merges_still_read_as_pyyaml_reads_them() -> None:
    import yaml

    from sits_doctor.source_yaml import parse_yaml

    text = ("base: &base {max_model_len: 1024, dtype: auto}\nmore: &more {max_model_len: 2048, seed: 1}\n"
            "one: {<<: [*base, *more], dtype: half}\ntwo: {<<: *base, <<: *more}\n")
    assert parse_yaml(text, "x.yaml")[0].data == yaml.safe_load(text)
