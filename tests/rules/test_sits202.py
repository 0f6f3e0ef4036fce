"""SITS202 max-model-len-exceeds-model: edge cases of vLLM's max_model_len derivation.

Expected behaviour comes from vLLM's ``_get_and_verify_max_len`` (read in the vLLM source releases,
summarised in shared/research/vllm-hf-facts.md §1a and vllm_helm_k8s.md §1d): min of the length
keys, truthy ``model_max_length`` overrides, ``--disable-sliding-window`` caps at the window,
RoPE factor multiplies unless the type is exempt (su/longrope/llama3; +yarn family from 0.30),
YaRN starts from ``original_max_position_embeddings`` up to 0.29, Gemma3 never scaled (≥0.8),
``rope_parameters`` read from 0.12, null factor → 1.0, ``VLLM_ALLOW_LONG_MAX_MODEL_LEN`` turns
the ValueError into a warning.

The derived value in vLLM's own message may print as a float (``8192.0``) once a RoPE factor has
been applied, so the tests check the ValueError text up to the number and after it separately.
"""

from __future__ import annotations

import json

import harness
import pytest

from conftest import LLAMA_8B, k8s_deployment, run_cli, write

from sits_doctor.finding import Severity

CODE = "SITS202"


def model(**fields) -> str:
    """A tiny Llama-style config.json: 8192 positions unless overridden (None removes a key)."""
    data = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "max_position_embeddings": 8192,
        "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 2,
    }
    data.update(fields)
    return json.dumps({k: v for k, v in data.items() if v is not None}, indent=2)


def findings(tmp_path, monkeypatch, files: dict[str, str], main: str, target="vllm==0.29.0", **opts):
    return harness.findings(tmp_path, monkeypatch, files, main, CODE, target, **opts)


def serve(tmp_path, monkeypatch, max_model_len, config: str, extra: str = "", target="vllm==0.29.0", **opts):
    """``vllm serve --config serve.yaml`` with ``model: ./m``; max-model-len on line 2."""
    files = {"m/config.json": config, "serve.yaml": f"model: ./m\nmax-model-len: {max_model_len}\n{extra}"}
    return findings(tmp_path, monkeypatch, files, "serve.yaml", target=target, **opts)


def vllm_value_error(requested: int, key: str, derived: int, model_max_length) -> tuple[str, str]:
    """vLLM's ValueError text, split around the derived number (int or float in vLLM's output)."""
    head = (f"ValueError: User-specified max_model_len ({requested}) is greater than "
            f"the derived max_model_len ({key}={derived}")
    tail = f" or model_max_length={model_max_length} in model's config.json)."
    return head, tail


def assert_error(found, requested: int, limit: int, version: str, key: str = "max_position_embeddings",
                 derived: int | None = None, model_max_length=None, line: int = 2, col: int = 1, file="serve.yaml"):
    assert len(found) == 1, [f.render() for f in found]
    f = found[0]
    assert (f.code, f.severity, f.location.file, f.location.line, f.location.col) == (
        CODE, Severity.ERROR, file, line, col)
    assert f.message == (f"max_model_len {requested} exceeds the {limit} that vLLM {version} derives from the model: "
                         "startup fails (ValueError)"), f.message
    head, tail = vllm_value_error(requested, key, limit if derived is None else derived, model_max_length)
    said = f.evidence[0]  # vLLM's own words come first in the evidence
    assert said.startswith(f"vLLM {version} prints: {head}"), said
    assert said.endswith(tail), said
    assert f.fix_hint == f"set max_model_len to at most {limit}"


# --- the plain comparison ------------------------------------------------------------------------


def test_fail_above_max_position_embeddings(tmp_path, monkeypatch):
    found = serve(tmp_path, monkeypatch, 8193, model())
    assert_error(found, 8193, 8192, "0.29.0")
    assert found[0].render().startswith(
        "serve.yaml:2:1: SITS202 [error] max_model_len 8193 exceeds the 8192 that vLLM 0.29.0 derives "
        "from the model: startup fails (ValueError)"
    )


def test_pass_equal_to_max_position_embeddings(tmp_path, monkeypatch):
    assert serve(tmp_path, monkeypatch, 8192, model()) == []


@pytest.mark.parametrize("value", ["-1", "auto"])
def test_pass_minus_one_and_auto(tmp_path, monkeypatch, value):
    assert serve(tmp_path, monkeypatch, value, model(max_position_embeddings=512)) == []


def test_pass_smallest_length_key_wins_but_is_not_exceeded(tmp_path, monkeypatch):
    # min over the present length keys: n_positions 4096 < max_position_embeddings 8192
    assert serve(tmp_path, monkeypatch, 4096, model(n_positions=4096)) == []


def test_fail_smallest_length_key_is_named(tmp_path, monkeypatch):
    found = serve(tmp_path, monkeypatch, 4097, model(n_positions=4096))
    assert_error(found, 4097, 4096, "0.29.0", key="n_positions")


# --- human-readable values (vLLM ≥0.11: 1k = 1000, 1K = 1024) -------------------------------------


@pytest.mark.parametrize("value", ["8k", "8K", "'8K'", "8.192k"])
def test_pass_human_readable_within_limit(tmp_path, monkeypatch, value):
    assert serve(tmp_path, monkeypatch, value, model()) == []


def test_fail_human_readable_binary_suffix(tmp_path, monkeypatch):
    found = serve(tmp_path, monkeypatch, "9K", model())  # 9 × 1024 = 9216
    assert_error(found, 9216, 8192, "0.29.0")


def test_fail_human_readable_decimal_suffix(tmp_path, monkeypatch):
    found = serve(tmp_path, monkeypatch, "8.2k", model())  # 8200
    assert_error(found, 8200, 8192, "0.29.0")


# --- RoPE ----------------------------------------------------------------------------------------

LINEAR_4 = {"rope_type": "linear", "factor": 4.0}


def test_pass_linear_rope_factor_lengthens(tmp_path, monkeypatch):
    assert serve(tmp_path, monkeypatch, 32768, model(rope_scaling=LINEAR_4)) == []


def test_fail_linear_rope_one_past_scaled_length(tmp_path, monkeypatch):
    found = serve(tmp_path, monkeypatch, 32769, model(rope_scaling=LINEAR_4))
    assert_error(found, 32769, 32768, "0.29.0")


def test_pass_legacy_type_key_is_read_like_rope_type(tmp_path, monkeypatch):
    assert serve(tmp_path, monkeypatch, 32768, model(rope_scaling={"type": "linear", "factor": 4.0})) == []


def test_pass_dynamic_rope_factor_lengthens(tmp_path, monkeypatch):
    assert serve(tmp_path, monkeypatch, 16384, model(rope_scaling={"rope_type": "dynamic", "factor": 2.0})) == []


def test_pass_llama3_rope_at_max_position_embeddings(tmp_path, monkeypatch):
    assert serve(tmp_path, monkeypatch, 131072, LLAMA_8B) == []


def test_fail_llama3_rope_is_not_scaled(tmp_path, monkeypatch):
    # llama3 is exempt: 131072 stays 131072, not 131072 × 8
    found = serve(tmp_path, monkeypatch, 131073, LLAMA_8B)
    assert_error(found, 131073, 131072, "0.29.0")


def test_pass_longrope_is_not_scaled_but_not_shortened(tmp_path, monkeypatch):
    cfg = model(max_position_embeddings=131072, original_max_position_embeddings=4096,
                rope_scaling={"rope_type": "longrope", "short_factor": [1.0], "long_factor": [1.0]})
    assert serve(tmp_path, monkeypatch, 131072, cfg) == []


YARN_FROM_32K = model(max_position_embeddings=32768,
                      rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768})


def test_pass_yarn_scaled_from_original_on_0_29(tmp_path, monkeypatch):
    # ≤0.29: original_max_position_embeddings (32768) × factor 4 = 131072
    assert serve(tmp_path, monkeypatch, 131072, YARN_FROM_32K, target="vllm==0.29.0") == []


def test_fail_yarn_one_past_scaled_length_on_0_29(tmp_path, monkeypatch):
    found = serve(tmp_path, monkeypatch, 131073, YARN_FROM_32K, target="vllm==0.29.0")
    assert_error(found, 131073, 131072, "0.29.0")


def test_fail_yarn_not_scaled_on_0_30(tmp_path, monkeypatch):
    # ≥0.30: YaRN is exempt; max_position_embeddings (32768) is already the scaled length
    found = serve(tmp_path, monkeypatch, 131072, YARN_FROM_32K, target="vllm==0.30.0")
    assert_error(found, 131072, 32768, "0.30.0")


def test_pass_yarn_at_max_position_embeddings_on_0_30(tmp_path, monkeypatch):
    assert serve(tmp_path, monkeypatch, 32768, YARN_FROM_32K, target="vllm==0.30.0") == []


YARN_SHORT_ORIGINAL = model(max_position_embeddings=131072,
                            rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192})


def test_fail_yarn_starts_from_original_on_0_29(tmp_path, monkeypatch):
    # ≤0.29 replaces max_position_embeddings by 8192, then × 4 = 32768
    found = serve(tmp_path, monkeypatch, 65536, YARN_SHORT_ORIGINAL, target="vllm==0.29.0")
    assert_error(found, 65536, 32768, "0.29.0")


def test_pass_yarn_short_original_on_0_30(tmp_path, monkeypatch):
    assert serve(tmp_path, monkeypatch, 65536, YARN_SHORT_ORIGINAL, target="vllm==0.30.0") == []


GEMMA3 = json.dumps({
    "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
    "text_config": {"model_type": "gemma3_text", "max_position_embeddings": 131072, "hidden_size": 64,
                    "num_hidden_layers": 2, "num_attention_heads": 2,
                    "rope_scaling": {"rope_type": "linear", "factor": 8.0}},
    "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 32},
}, indent=2)


def test_pass_gemma3_at_text_config_length(tmp_path, monkeypatch):
    assert serve(tmp_path, monkeypatch, 131072, GEMMA3) == []


def test_fail_gemma3_rope_factor_not_applied(tmp_path, monkeypatch):
    found = serve(tmp_path, monkeypatch, 131073, GEMMA3)
    assert_error(found, 131073, 131072, "0.29.0")


def test_pass_gemma3_scaled_before_the_exemption_existed(tmp_path, monkeypatch):
    # 0.7.3 has no Gemma3 exemption: 131072 × 8
    assert serve(tmp_path, monkeypatch, 1048576, GEMMA3, target="vllm==0.7.3") == []


NESTED_V5 = model(rope_parameters={
    "full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 1000000.0},
    "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
})


def test_pass_nested_rope_parameters_scaled_from_0_12(tmp_path, monkeypatch):
    assert serve(tmp_path, monkeypatch, 16384, NESTED_V5, target="vllm==0.12.0") == []


def test_fail_nested_rope_parameters_one_past_on_0_12(tmp_path, monkeypatch):
    found = serve(tmp_path, monkeypatch, 16385, NESTED_V5, target="vllm==0.12.0")
    assert_error(found, 16385, 16384, "0.12.0")


def test_fail_nested_rope_parameters_ignored_on_0_11(tmp_path, monkeypatch):
    # 0.11 reads rope_scaling only
    found = serve(tmp_path, monkeypatch, 16384, NESTED_V5, target="vllm==0.11.0")
    assert_error(found, 16384, 8192, "0.11.0")


def test_pass_rope_scaling_still_read_on_0_11_next_to_rope_parameters(tmp_path, monkeypatch):
    cfg = model(rope_scaling={"rope_type": "linear", "factor": 2.0},
                rope_parameters={"rope_type": "linear", "factor": 1.0, "rope_theta": 10000.0})
    assert serve(tmp_path, monkeypatch, 16384, cfg, target="vllm==0.11.0") == []


def test_pass_null_rope_factor_counts_as_one(tmp_path, monkeypatch):
    assert serve(tmp_path, monkeypatch, 8192, model(rope_scaling={"rope_type": "linear", "factor": None})) == []


def test_fail_null_rope_factor_does_not_lengthen(tmp_path, monkeypatch):
    found = serve(tmp_path, monkeypatch, 8193, model(rope_scaling={"rope_type": "linear", "factor": None}))
    assert_error(found, 8193, 8192, "0.29.0")


# --- model_max_length override (Command-R style) --------------------------------------------------


def test_pass_model_max_length_above_positions_allows_more(tmp_path, monkeypatch):
    assert serve(tmp_path, monkeypatch, 131072, model(model_max_length=131072)) == []


def test_fail_above_model_max_length(tmp_path, monkeypatch):
    found = serve(tmp_path, monkeypatch, 131073, model(model_max_length=131072))
    assert_error(found, 131073, 131072, "0.29.0", key="model_max_length", model_max_length=131072)


def test_pass_model_max_length_below_positions(tmp_path, monkeypatch):
    cfg = model(max_position_embeddings=131072, model_max_length=8192)
    assert serve(tmp_path, monkeypatch, 8192, cfg) == []


def test_fail_model_max_length_below_positions_limits(tmp_path, monkeypatch):
    cfg = model(max_position_embeddings=131072, model_max_length=8192)
    found = serve(tmp_path, monkeypatch, 8193, cfg)
    assert_error(found, 8193, 8192, "0.29.0", key="model_max_length", model_max_length=8192)


# --- sliding window ------------------------------------------------------------------------------

WINDOWED = model(max_position_embeddings=32768, sliding_window=4096)


def test_fail_disable_sliding_window_caps_at_window(tmp_path, monkeypatch):
    found = serve(tmp_path, monkeypatch, 4097, WINDOWED, "disable-sliding-window: true\n")
    assert_error(found, 4097, 4096, "0.29.0", key="sliding_window")


def test_pass_disable_sliding_window_at_window(tmp_path, monkeypatch):
    assert serve(tmp_path, monkeypatch, 4096, WINDOWED, "disable-sliding-window: true\n") == []


def test_pass_sliding_window_without_disable(tmp_path, monkeypatch):
    assert serve(tmp_path, monkeypatch, 32768, WINDOWED) == []


# --- no length key in config.json ----------------------------------------------------------------


def test_pass_no_length_key_keeps_user_value(tmp_path, monkeypatch):
    cfg = model(max_position_embeddings=None, architectures=["FooForCausalLM"], model_type="foo")
    assert serve(tmp_path, monkeypatch, 4096, cfg) == []


# --- Kubernetes: VLLM_ALLOW_LONG_MAX_MODEL_LEN ---------------------------------------------------

DEPLOYMENT = k8s_deployment('          image: vllm/vllm-openai:v0.29.0', '          args: ["--model", "./m", "--max-model-len", "16384"{extra_args}]', '          env:', '            - name: VLLM_ALLOW_LONG_MAX_MODEL_LEN', '              value: "{allow}"')


def k8s(tmp_path, monkeypatch, allow="1", extra_args="", config=None):
    files = {"m/config.json": config or model(),
             "k8s.yaml": DEPLOYMENT.format(allow=allow, extra_args=extra_args)}
    return findings(tmp_path, monkeypatch, files, "k8s.yaml")


@pytest.mark.parametrize("allow", ["1", "true", "True"])
def test_fail_allow_long_max_model_len_is_a_warning(tmp_path, monkeypatch, allow):
    found = k8s(tmp_path, monkeypatch, allow=allow)
    assert [f.render() for f in found] == [
        "k8s.yaml:11:36: SITS202 [warning] max_model_len 16384 exceeds the model's 8192 positions; "
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN lets vLLM start, but positions past 8192 give NaN (RoPE) or "
        "out-of-bounds reads (absolute positions)"
    ]
    assert found[0].fix_hint == "set max_model_len to at most 8192 and drop VLLM_ALLOW_LONG_MAX_MODEL_LEN"


def test_fail_allow_long_max_model_len_zero_is_still_an_error(tmp_path, monkeypatch):
    found = k8s(tmp_path, monkeypatch, allow="0")
    assert_error(found, 16384, 8192, "0.29.0", file="k8s.yaml", line=11, col=36)


def test_pass_hf_overrides_in_k8s_args(tmp_path, monkeypatch):
    extra = ", \"--hf-overrides\", '{\"max_position_embeddings\": 16384}'"
    assert k8s(tmp_path, monkeypatch, allow="0", extra_args=extra) == []


# --- hf_overrides --------------------------------------------------------------------------------


def test_pass_hf_overrides_mapping_raises_positions(tmp_path, monkeypatch):
    extra = "hf-overrides:\n  max_position_embeddings: 32768\n"
    assert serve(tmp_path, monkeypatch, 32768, model(), extra) == []


def test_pass_hf_overrides_json_string_raises_positions(tmp_path, monkeypatch):
    extra = "hf-overrides: '{\"max_position_embeddings\": 32768}'\n"
    assert serve(tmp_path, monkeypatch, 32768, model(), extra) == []


def test_fail_above_hf_overrides_value(tmp_path, monkeypatch):
    extra = "hf-overrides:\n  max_position_embeddings: 32768\n"
    found = serve(tmp_path, monkeypatch, 32769, model(), extra)
    assert_error(found, 32769, 32768, "0.29.0")


# --- model resolution ----------------------------------------------------------------------------


def test_fail_unknown_hub_model_is_info_naming_model_config(tmp_path, monkeypatch):
    files = {"serve.yaml": "model: sits-doctor-tests/no-such-model-xyz\nmax-model-len: 9000\n"}
    found = findings(tmp_path, monkeypatch, files, "serve.yaml")
    assert [f.render() for f in found] == [
        "serve.yaml:2:1: SITS202 [info] cannot check max_model_len 9000 against the model: model "
        "'sits-doctor-tests/no-such-model-xyz' was not found locally"
    ]
    assert found[0].evidence == (
        "why: it is not a local path, its config.json is not in the local Hugging Face cache and it is not in the "
        "bundled model catalog: pass --model-config PATH (nothing is downloaded)",)


def test_pass_templated_max_model_len_is_not_judged(tmp_path, monkeypatch):
    text = k8s_deployment(
        '          image: vllm/vllm-openai:v0.29.0',
        '          args:',
        '            - --model',
        '            - ./m',
        '            - --max-model-len',
        '            - "{{ .Values.maxModelLen }}"',
    )
    files = {"m/config.json": model(max_position_embeddings=16), "k8s.yaml": text}
    assert findings(tmp_path, monkeypatch, files, "k8s.yaml") == []


@pytest.mark.parametrize("where", ["cfg", "cfg/config.json"])
def test_fail_model_config_option_resolves_the_model(tmp_path, monkeypatch, where):
    files = {"cfg/config.json": model(), "serve.yaml": "model: some-org/not-on-disk\nmax-model-len: 8193\n"}
    found = findings(tmp_path, monkeypatch, files, "serve.yaml", model_config=where)
    assert_error(found, 8193, 8192, "0.29.0")


def test_pass_model_config_option_within_limit(tmp_path, monkeypatch):
    files = {"cfg/config.json": model(), "serve.yaml": "model: some-org/not-on-disk\nmax-model-len: 8192\n"}
    assert findings(tmp_path, monkeypatch, files, "serve.yaml", model_config="cfg") == []


def test_fail_model_config_option_on_the_command_line(tmp_path):
    write(tmp_path, "cfg/config.json", model())
    write(tmp_path, "serve.yaml", "model: some-org/not-on-disk\nmax-model-len: 8193\n")
    result = run_cli("check", "--isolated", "-q", "--select", CODE, "--target", "vllm==0.29.0",
                     "--model-config", "cfg", "serve.yaml", cwd=tmp_path)
    assert result.exit_code == 1
    assert result.stdout.startswith(
        "serve.yaml:2:1: SITS202 [error] max_model_len 8193 exceeds the 8192 that vLLM 0.29.0 derives from "
        "the model: startup fails (ValueError)"
    ), result.stdout


def test_pass_model_config_option_keeps_hf_overrides(tmp_path, monkeypatch):
    files = {"cfg/config.json": model(),
             "serve.yaml": "model: some-org/not-on-disk\nmax-model-len: 32768\n"
                           "hf-overrides:\n  max_position_embeddings: 32768\n"}
    assert findings(tmp_path, monkeypatch, files, "serve.yaml", model_config="cfg") == []


def test_pass_a_hub_model_from_the_bundled_catalog_is_checked(tmp_path, monkeypatch):
    # Qwen/Qwen2.5-7B-Instruct: max_position_embeddings 32768 in the catalog's copy of its config.json
    files = {"serve.yaml": "model: Qwen/Qwen2.5-7B-Instruct\nmax-model-len: 32768\n"}
    assert findings(tmp_path, monkeypatch, files, "serve.yaml") == []


def test_fail_a_hub_model_from_the_bundled_catalog_is_checked(tmp_path, monkeypatch):
    files = {"serve.yaml": "model: Qwen/Qwen2.5-7B-Instruct\nmax-model-len: 65536\n"}
    (found,) = findings(tmp_path, monkeypatch, files, "serve.yaml")
    assert found.code == "SITS202" and found.severity.value == "error"
    assert "model catalog: https://huggingface.co/Qwen/Qwen2.5-7B-Instruct/blob/main/config.json" in " ".join(
        [found.render(), *found.evidence])
