"""What sits-doctor knows about vLLM (sits_doctor.frameworks.vllm) and how it reads a vLLM command
line (sits_doctor.loaders.vllm_args): value coercion, flag parsing, the parser-data lookups (over a
small made-up parser table, so the answers do not move when the real data is regenerated), the
--config loader's dropped `false` lines and the effective serving facts."""

from __future__ import annotations

import pytest

from sits_doctor.facts import Value
from sits_doctor.frameworks import vllm as fw
from sits_doctor.loaders import vllm_args as va
from sits_doctor.loaders.vllm_args import Token, coerce, parse_args, parse_human_int
from sits_doctor.plan import Plan, Provenance, Setting, Site, Target, Word
from sits_doctor.source_yaml import parse_yaml


def toks(*texts: str, site: str = "argv") -> list[Token]:
    return [Token(t, Provenance(file="c", line=n + 1), site=site) for n, t in enumerate(texts)]


def parsed(*texts: str) -> dict:
    settings, positional = parse_args(toks(*texts))
    return {k: s.value for k, s in settings.items()}, [t.text for t in positional]


# --- parse_human_int / coerce ----------------------------------------------------------------------

@pytest.mark.parametrize("value, expected", [
    (True, "True"), (False, "False"), (5, 5), (-3, -3), ("12", 12), (" 12 ", 12), ("-12", -12), ("2.0", 2),
    ("1k", 1000), ("1K", 1024), ("25.6k", 25600), ("2m", 2_000_000), ("2M", 2 * 1024**2), ("1g", 10**9),
    ("1G", 1024**3), ("1.5", "1.5"), ("0.0001k", "0.0001k"), ("auto", "auto"), ("-1k", "-1k"), ("1t", "1t"),
    ("", ""), (None, "None"),
])
def test_parse_human_int(value, expected):
    got = parse_human_int(value)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize("key, value, expected", [
    ("max_model_len", "8k", 8000), ("max_model_len", 4096, 4096), ("max_model_len", "auto", "auto"),
    ("max_model_len.x", "8k", "8k"),
    ("compilation_config.level", "3", 3), ("compilation_config.x", '{"a": 1}', {"a": 1}),
    ("compilation_config.x", " [1, 2]", [1, 2]), ("compilation_config.x", "PIECEWISE", "PIECEWISE"),
    ("compilation_config.x", "true", True), ("compilation_config.x", 3, 3),
    ("max_num_seqs", "8", 8), ("max_num_seqs", "eight", "eight"), ("max_num_seqs", 8, 8),
    ("gpu_memory_utilization", "0.5", 0.5), ("gpu_memory_utilization", "most", "most"),
    ("enforce_eager", "True", True), ("enforce_eager", "FALSE", False), ("enforce_eager", "yes", "yes"),
    ("enforce_eager", True, True),
    ("hf_overrides", '{"a": 1}', {"a": 1}), ("hf_overrides", " [1]", [1]), ("hf_overrides", "{bad", "{bad"),
    ("hf_overrides", "a=1", "a=1"),
    ("dtype", "8", "8"), ("unknown_option", "8", "8"), ("served_model_name", "true", "true"),
])
def test_coerce(key, value, expected):
    got = coerce(key, value)
    assert got == expected and type(got) is type(expected)


def test_is_flag():
    assert va._is_flag("--x") and va._is_flag("-tp") and va._is_flag("-O3") and va._is_flag("-1a")
    for text in ("x", "-", "-1", "-1.5", "-10", ""):
        assert not va._is_flag(text), text


def test_is_shell_templated():
    # a script's arguments ($1, ${2:-2}, "$@") are not known from the file either
    for text in ("$X", "${X}", "$(X)", "a$B_1c", "--x=$PORT", "$1", "${2:-2}", "$@"):
        assert va.is_shell_templated(text) is True
    for text in ("$", "x", "a$", "$-"):
        assert va.is_shell_templated(text) is False


# --- parse_args ------------------------------------------------------------------------------------

def test_parse_args_flags_values_and_positionals():
    values, positional = parsed("m", "--max-model-len", "8k", "--enforce-eager", "--dtype=half", "-tp", "2",
                                "--served-model-name", "a", "b", "--trust_remote_code", "extra")
    assert values == {"max_model_len": 8000, "enforce_eager": True, "dtype": "half", "tensor_parallel_size": 2,
                      "served_model_name": ["a", "b"], "trust_remote_code": True}
    assert positional == ["m", "extra"]


def test_parse_args_no_flags():
    assert parsed("--no-enforce-eager", "m") == ({"enforce_eager": False}, ["m"])
    assert parsed("--no-unknown") == ({"unknown": False}, [])
    assert parsed("--no-unknown", "--x") == ({"unknown": False, "x": True}, [])
    assert parsed("--no-unknown", "v") == ({"no_unknown": "v"}, [])


def test_parse_args_bool_word_after_a_flag():
    assert parsed("--enforce-eager", "False", "m") == ({"enforce_eager": False}, ["m"])
    assert parsed("--enforce-eager", "true") == ({"enforce_eager": True}, [])
    assert parsed("--enforce-eager", "m") == ({"enforce_eager": True}, ["m"])
    settings, _ = parse_args(toks("--enforce-eager", "false"))
    assert settings["enforce_eager"].raw == "false"


def test_parse_args_list_options_stop_at_flags_and_operators():
    assert parsed("--served-model-name", "--x") == ({"served_model_name": [], "x": True}, [])
    tokens = toks("--served-model-name", "a", "&&", "b")
    tokens[2] = tokens[2]._replace(operator=True)
    settings, positional = parse_args(tokens)
    assert settings["served_model_name"].value == ["a"] and [t.text for t in positional] == ["&&", "b"]


def test_parse_args_values_and_missing_values():
    assert parsed("--dtype") == ({"dtype": True}, [])
    assert parsed("--dtype", "--x", "1") == ({"dtype": True, "x": "1"}, [])
    assert parsed("--port", "-1") == ({"port": -1}, [])
    assert parsed("-O3") == ({"optimization_level": 3}, [])
    assert parsed("-O", "3") == ({"O": "3"}, [])  # -O alone is no shorthand here (the parser data judges it)


def test_parse_args_dotted_and_json_options():
    values, _ = parsed("--compilation-config", '{"level": 3, "cudagraph_mode": {"a": 1}}', "-cc.mode=2",
                       "--max_model-len.x=1")
    assert values == {"compilation_config": {"level": 3, "cudagraph_mode": {"a": 1}},
                      "compilation_config.level": 3, "compilation_config.cudagraph_mode": {"a": 1},
                      "compilation_config.cudagraph_mode.a": 1, "compilation_config.mode": 2,
                      "max_model_len.x": 1}
    settings, _ = parse_args(toks("--compilation-config", '{"level": 3}'))
    nested = settings["compilation_config.level"]
    assert nested.raw_key == "level" and nested.raw == 3 and nested.site is None


def test_parse_args_templated_values_stay_raw():
    tokens = toks("--max-model-len", "$LEN", "--served-model-name", "a", "$B", "--port", "8000")
    tokens[1] = tokens[1]._replace(templated=True)
    tokens[4] = tokens[4]._replace(templated=True)
    settings, _ = parse_args(tokens)
    assert settings["max_model_len"].value == "$LEN" and settings["max_model_len"].templated is True
    assert settings["served_model_name"].templated is True
    assert settings["port"].value == 8000 and settings["port"].templated is False


def test_parse_args_sites():
    (doc,) = parse_yaml("a: 1\n", "c.yaml")
    tokens = [Token("--x=1", Provenance(), False, Word("--x=1", 0, 5, "/a/0"), "shell"),
              Token("--y", Provenance(), False, Word("--y", 6, 9, "/a/1"), "argv"),
              Token("2", Provenance(), False, Word("2", 10, 11, "/a/2"), "argv"),
              Token("--z", Provenance(), False, None, "argv")]
    settings, _ = parse_args(tokens, doc)
    assert settings["x"].site == Site("shell", doc, "/a/0", (Word("--x=1", 0, 5, "/a/0"),), True)
    assert settings["y"].site == Site("argv", doc, "/a/1", (Word("--y", 6, 9, "/a/1"), Word("2", 10, 11, "/a/2")))
    assert settings["z"].site == Site("argv", doc, "", (Word("--z"),))
    assert parse_args(tokens)[0]["x"].site is None


def test_site_of():
    (doc,) = parse_yaml("a: 1\n", "c.yaml")
    helm = Token("--x", Provenance(), False, Word("--x", 0, 3, "/vllmConfig/x"), "helm")
    assert va.site_of(doc, [helm]) == Site("helm", doc, "/vllmConfig/x", (helm.word,))
    value = Token("1", Provenance(), False, Word("1", pointer="/vllmConfig/x"), "helm")
    assert va.site_of(doc, [helm, value]) == Site("helm", doc, "/vllmConfig/x", (helm.word, value.word))
    assert va.site_of(doc, [helm._replace(word=None)]) == Site("helm", doc, "", (Word("--x"),))
    first = Token("--x", Provenance(), False, Word("--x", 0, 3, "/p/0"), "shell")
    second = Token("1", Provenance(), False, Word("1", 4, 5, "/p/1"), "argv")
    assert va.site_of(doc, [first, second]) == Site("shell", doc, "/p/0", (first.word, second.word))
    assert va.site_of(doc, [second, first]) == Site("argv", doc, "/p/1", (second.word, first.word))
    assert va.site_of(doc, [helm, first]).kind == "helm"


def test_expand_nested():
    s = Setting("compilation_config", "--compilation-config", {"a": {"b": 1}, "c": 2}, "x",
                site=Site("argv", None, "/p"))
    out = va.expand_nested(s)
    assert sorted(out) == ["compilation_config.a", "compilation_config.a.b", "compilation_config.c"]
    assert out["compilation_config.a.b"] == s.with_(key="compilation_config.a.b", raw_key="b", value=1, raw=1, site=None)
    assert va.expand_nested(s.with_(value=[1])) == {}


# --- option table helpers ----------------------------------------------------------------------------

def test_option_helpers():
    assert fw.option("max_model_len.x").name == "max_model_len"
    assert fw.option("nope") is None
    assert fw.kind_of("max_model_len") == "human_int" and fw.kind_of("nope") is None
    assert fw.normalize_key("max-model-len") == "max_model_len"
    assert fw.normalize_key("compilation-config.cudagraph-mode") == "compilation_config.cudagraph-mode"
    assert fw.flag_of("compilation_config.cudagraph_mode") == "--compilation-config.cudagraph_mode"
    assert fw.flag_of("max_model_len", dashed=False) == "--max_model_len"
    assert fw.OPTIONS["max_model_len"].flag == "--max-model-len"
    assert fw.SHORTHANDS["-tp"] == "tensor_parallel_size" and fw.SHORTHANDS["-cc"] == "compilation_config"
    assert fw.is_generic("model") is True and fw.is_generic("max_model_len") is False and fw.is_generic("nope") is False
    assert fw.default_off("enforce_eager") is True and fw.default_off("enable_prefix_caching") is False
    assert "max_model_len" in fw.sniff_keys()


def test_default_on():
    from sits_doctor.versions import V

    assert fw.default_on("enable_prefix_caching", V(fw.V1_DEFAULT)) is True
    assert fw.default_on("enable_prefix_caching", V("0.7.3")) is False
    assert fw.default_on("enforce_eager", V("0.33.0")) is False
    assert fw.default_on("nope", V("0.33.0")) is False


# --- yaml_false_dropped ------------------------------------------------------------------------------

def _false(key: str, raw_key: str, raw=False) -> Setting:
    return Setting(key, raw_key, raw, raw)


@pytest.mark.parametrize("setting, version, dropped", [
    (_false("enforce_eager", "enforce_eager"), "0.28.0", True),
    (_false("enforce_eager", "enforce-eager"), "0.28.0", False),
    (_false("enforce_eager", "enforce-eager"), "0.27.1", True),
    (_false("enforce_eager", "enforce_eager"), "0.8.0", True),
    (_false("enable_chunked_prefill", "enable_chunked_prefill"), "0.6.6", False),
    (_false("enable_chunked_prefill", "enable_chunked_prefill"), "0.8.4", False),
    (_false("enable_chunked_prefill", "enable_chunked_prefill"), "0.8.5", True),
    (_false("enable_chunked_prefill", "enable_chunked_prefill"), "0.6.5", True),
    (_false("enable_chunked_prefill", "enable-chunked-prefill"), "0.7.0", True),
    (_false("enforce_eager", "enforce_eager", raw=0), "0.8.0", False),
    (_false("enforce_eager", "enforce_eager", raw="false"), "0.8.0", False),
    (_false("compilation_config.x", "x"), "0.8.0", False),
])
def test_yaml_false_dropped(setting, version, dropped):
    assert fw.yaml_false_dropped(setting, version) is dropped


# --- the parser data lookups, over a made-up table -------------------------------------------------------

RELEASES = ["1.0", "1.1", "1.2", "1.3", "1.4"]
OLD = {"first_i": 0, "last_i": 1, "allow_abbrev": True, "dotted_json": False, "dash_O": False}
NEW = {"first_i": 2, "last_i": 4, "allow_abbrev": False, "dotted_json": True, "dash_O": True,
       "underscore_to_dash": False}
SEG = {"kind": "int"}
FLAGS = {
    "--alpha-one": [(0, 4, "alpha_one", SEG)],
    "--alpha-two": [(0, 1, "alpha_two", SEG)],
    "--beta": [(0, 0, "beta", {"kind": "bool"}), (1, 2, "beta", {"kind": "bool", "deprecated": True}),
               (4, 4, "beta", {"kind": "bool", "deprecated": True})],
    "--cfg": [(0, 4, "cfg", {"kind": "json"})],
    "--num": [(2, 4, "num", {"kind": "int"})],
    "-O": [(0, 1, "cfg", {"kind": "json"})],
    "--optimization-level": [(3, 4, "optimization_level", SEG)],
    "--gamma": [(3, 3, "gamma", SEG), (0, 1, "gamma", SEG), (2, 2, "gamma", SEG)],
    "--delta": [(0, 0, "delta", SEG), (2, 2, "delta", SEG)],
    "--eps": [(0, 3, "eps", SEG), (1, 2, "eps_old", SEG)],
    "--zeta": [(0, 0, "zeta", SEG), (2, 4, "zeta", SEG), (3, 3, "zeta_old", SEG)],
}


@pytest.fixture
def table(monkeypatch):
    monkeypatch.setattr(fw, "parser_table", lambda: (RELEASES, FLAGS, [OLD, NEW]))


def test_lookup_flag(table):
    assert fw.lookup_flag("--alpha-one", "1.0") == fw.FlagInfo("--alpha-one", "alpha_one", SEG)
    assert fw.lookup_flag("--alpha_one", "1.1") == fw.FlagInfo("--alpha-one", "alpha_one", SEG)
    assert fw.lookup_flag("--alpha_one", "1.2") is None  # this parser does not turn _ into -
    assert fw.lookup_flag("--alpha-two", "1.2") is None
    assert fw.lookup_flag("--num", "1.1") is None and fw.lookup_flag("--num", "1.2").dest == "num"
    assert fw.lookup_flag("--num", "1.4").dest == "num"


def test_lookup_flag_dotted(table):
    assert fw.lookup_flag("--cfg.x", "1.1") is None
    assert fw.lookup_flag("--cfg.x", "1.2") == fw.FlagInfo("--cfg", "cfg", {"kind": "json"})
    assert fw.lookup_flag("--num.x", "1.2") is None
    assert fw.lookup_flag("--nope.x", "1.2") is None


def test_lookup_flag_dash_o(table):
    assert fw.lookup_flag("-O", "1.0") is None  # the old parser does not rewrite -O<n>
    assert fw.lookup_flag("-O", "1.2") is None  # neither -O nor its targets at 1.2
    assert fw.lookup_flag("-O", "1.3").flag == "--optimization-level"


def test_lookup_flag_abbreviations(table):
    assert fw.lookup_flag("--alpha-t", "1.0") == fw.FlagInfo("--alpha-two", "alpha_two", SEG, abbreviation=True)
    assert fw.lookup_flag("--alpha", "1.0") is None  # two flags start so
    assert fw.lookup_flag("--gam", "1.1").flag == "--gamma"
    assert fw.lookup_flag("--nu", "1.1") is None  # --num is not there yet
    assert fw.lookup_flag("--nu", "1.2") is None  # this parser allows no abbreviation
    assert fw.lookup_flag("-alpha-t", "1.0") is None


def test_flag_history(table):
    assert fw.flag_history("--gamma") == [("1.0", "1.3")]
    assert fw.flag_history("--delta") == [("1.0", "1.0"), ("1.2", "1.2")]
    assert fw.flag_history("--eps") == [("1.0", "1.3")]  # a run inside an earlier one
    assert fw.flag_history("--zeta") == [("1.0", "1.0"), ("1.2", "1.4")]  # ... of the second run
    assert fw.flag_history("--alpha_two") == [("1.0", "1.1")]
    assert fw.flag_history("--cfg.x") == [("1.2", "1.4")]
    assert fw.flag_history("--alpha-two.x") == []
    assert fw.flag_history("--nope") == []


def test_deprecated_since(table):
    assert fw.deprecated_since("--beta", "1.2") == "1.1"
    assert fw.deprecated_since("--beta", "1.1") == "1.1"
    assert fw.deprecated_since("--beta", "1.4") == "1.4"
    assert fw.deprecated_since("--beta.x", "1.2") == "1.1"
    assert fw.deprecated_since("--alpha-one", "1.3") == "1.3"


def test_next_release_and_flags_at(table):
    assert fw.next_release("1.0") == "1.1" and fw.next_release("1.3") == "1.4" and fw.next_release("1.4") is None
    assert fw.flags_at("1.2") == ["--alpha-one", "--beta", "--cfg", "--delta", "--eps", "--gamma", "--num", "--zeta"]
    assert fw.flags_at("1.4") == ["--alpha-one", "--beta", "--cfg", "--num", "--optimization-level", "--zeta"]


def test_parser_release(table, monkeypatch):
    assert fw.parser_release("0.9") is None
    assert fw.parser_release("1.0") == ("1.0", "")
    assert fw.parser_release("1.2.1") == ("1.2", "judged by the parser of vLLM 1.2, the nearest release below 1.2.1 in the data")
    assert fw.parser_release("1.4") == ("1.4", "")
    assert fw.parser_release("2.0") == ("1.4", "judged by the parser of vLLM 1.4, the newest release in the data")


def test_normalize_flag():
    assert fw.normalize_flag("--max_model_len") == "--max-model-len"
    assert fw.normalize_flag("--compilation_config.cudagraph_mode") == "--compilation-config.cudagraph_mode"
    assert fw.normalize_flag("-tp_x") == "-tp_x"


def test_the_real_parser_table():
    releases, flags, parser = fw.parser_table()
    assert releases == sorted(releases, key=__import__("sits_doctor.versions", fromlist=["V"]).V)
    assert parser[0]["first_i"] == 0 and parser[-1]["last_i"] == len(releases) - 1
    assert fw.lookup_flag("-tp", "0.8.5").dest == "tensor_parallel_size"
    assert fw.lookup_flag("--max_model_len", "0.8.5").flag == "--max-model-len"
    assert fw.lookup_flag("--max-model", "0.8.5") == fw.FlagInfo(
        "--max-model-len", "max_model_len", fw.lookup_flag("--max-model-len", "0.8.5").segment, abbreviation=True)


# --- written_options ----------------------------------------------------------------------------------

def _plan(kind: str, settings: dict, env: dict | None = None, version: str = "0.33.0") -> Plan:
    return Plan("vllm", kind, "p", "c.yaml", Provenance(file="c.yaml"), settings=settings, env=env or {},
                target=Target("vllm", version, "--target"))


def _set(key, raw_key, value, raw=None, site=True, templated=False):
    return Setting(key, raw_key, value, value if raw is None else raw, Provenance(file="c.yaml", line=3),
                   templated, Site("mapping", None, "/" + key) if site else None)


def test_written_options():
    yaml_plan = _plan("vllm-yaml", {
        "max_model_len": _set("max_model_len", "max-model-len", 4096),
        "enforce_eager": _set("enforce_eager", "enforce_eager", False),
        "compilation_config.level": _set("compilation_config.level", "level", 3),
        "seed": _set("seed", "seed", 1, site=False),
    })
    assert [(s.key, f) for s, f in fw.written_options(yaml_plan)] == [("max_model_len", "--max-model-len")]
    args_plan = _plan("vllm-args", {
        "max_model_len": _set("max_model_len", "--max-model-len", 4096),
        "optimization_level": _set("optimization_level", "-O3", 3),
        "x": _set("x", "x", 1),
        "tensor_parallel_size": _set("tensor_parallel_size", "-tp", 2),
        "y": _set("y", "-Ox", 1),
        "seed": _set("seed", "--seed", 1, site=False),
    })
    assert [f for _, f in fw.written_options(args_plan)] == ["--max-model-len", "-O", "-tp", "-Ox"]


# --- effective -------------------------------------------------------------------------------------

def serving(kind="vllm-args", version="0.33.0", env=None, **values):
    settings = {}
    for key, value in values.items():
        key = key.replace("__", ".")
        settings[key] = value if isinstance(value, Setting) else _set(key, key, value)
    plan = _plan(kind, settings, env, version)
    return fw.effective(plan, plan.target)


def test_effective_defaults():
    s = serving()
    assert s.max_model_len is None
    assert s.enforce_eager.value is False and s.enforce_eager.prov.kind == "default"
    assert s.enforce_eager.prov.note == "default of vLLM 0.33.0 (vllm/engine/arg_utils.py)"
    assert s.cuda_graphs.value is True and s.cuda_graphs.prov.kind == "derived"
    assert s.cuda_graphs.prov.note == ("CUDA graphs are on unless --enforce-eager, -O0 or cudagraph_mode NONE "
                                       "(vLLM 0.33.0)")
    assert s.block_size == Value.default(16, "default of vLLM 0.33.0 (vllm/config/cache.py)")
    assert (s.tensor_parallel.value, s.pipeline_parallel.value, s.data_parallel.value) == (1, 1, 1)
    assert s.expert_parallel.value is False
    assert s.memory_fraction.value == 0.92
    assert s.kv_cache_dtype.value == "auto"
    assert s.max_num_seqs.value is None and s.max_num_seqs.prov.note.startswith("default of vLLM 0.33.0 (depends on the GPU")
    assert s.max_num_batched_tokens.value is None
    assert s.prefix_caching.value is True and s.chunked_prefill.value is True
    assert s.attention_backend is None and s.cudagraph_mode is None and s.capture_sizes is None
    assert s.max_capture_size is None and s.speculative is None


def test_effective_defaults_by_version():
    s = serving(version="0.19.0")
    assert s.memory_fraction.value == 0.90
    assert serving(version="0.20.0").memory_fraction.value == 0.92
    old = serving(version="0.7.3")
    assert old.prefix_caching is None and old.chunked_prefill is None
    v1 = serving(version="0.8.0")
    assert v1.prefix_caching.value is True


def test_effective_reads_settings():
    s = serving(max_model_len=4096, max_num_seqs=8, max_num_batched_tokens=4096, block_size=32,
                tensor_parallel_size=2, pipeline_parallel_size=3, data_parallel_size=4, enable_expert_parallel=True,
                gpu_memory_utilization=0.5, kv_cache_dtype="fp8", attention_backend="FLASHINFER",
                enable_prefix_caching=False, enable_chunked_prefill=False, speculative_config={"a": 1},
                max_cudagraph_capture_size=64, cudagraph_capture_sizes=[1, 2])
    assert s.max_model_len.value == 4096 and s.max_model_len.prov.kind == "file"
    assert (s.max_num_seqs.value, s.max_num_batched_tokens.value, s.block_size.value) == (8, 4096, 32)
    assert (s.tensor_parallel.value, s.pipeline_parallel.value, s.data_parallel.value) == (2, 3, 4)
    assert s.expert_parallel.value is True and s.memory_fraction.value == 0.5
    assert s.kv_cache_dtype.value == "fp8" and s.attention_backend.value == "FLASHINFER"
    assert s.prefix_caching.value is False and s.chunked_prefill.value is False
    assert s.speculative.value == {"a": 1} and s.max_capture_size.value == 64 and s.capture_sizes.value == [1, 2]


def test_effective_falls_back_to_later_keys_and_skips_templated():
    s = serving(attention_config__backend="FLASH_ATTN", compilation_config__max_cudagraph_capture_size=32,
                cuda_graph_sizes=[4])
    assert s.attention_backend.value == "FLASH_ATTN" and s.max_capture_size.value == 32
    assert s.capture_sizes.value == [4]
    s = serving(max_num_seqs=_set("max_num_seqs", "--max-num-seqs", "$N", templated=True))
    assert s.max_num_seqs.value is None and s.max_num_seqs.prov.kind == "default"


def test_effective_max_model_len_must_be_an_int():
    assert serving(max_model_len="auto").max_model_len is None
    assert serving(max_model_len=-1).max_model_len is None  # vLLM derives it; no model to derive it from
    assert serving(max_model_len="auto", version="0.13.0").max_model_len.valid is False  # "auto" from 0.14


def test_effective_cuda_graphs():
    eager = serving(enforce_eager=True)
    assert eager.enforce_eager.value is True
    assert eager.cuda_graphs.value is False and eager.cuda_graphs.setting.key == "enforce_eager"
    o0 = serving(optimization_level=0)
    assert o0.cuda_graphs.value is False and o0.cuda_graphs.setting.key == "optimization_level"
    assert serving(compilation_config__level="0").cuda_graphs.setting.key == "compilation_config.level"
    assert serving(compilation_config__mode=0).cuda_graphs.value is False
    assert serving(optimization_level=3).cuda_graphs.value is True
    none = serving(compilation_config__cudagraph_mode="none")
    assert none.cuda_graphs.value is False and none.cuda_graphs.setting.key == "compilation_config.cudagraph_mode"
    assert none.cudagraph_mode.value == "none"
    assert serving(compilation_config__cudagraph_mode="PIECEWISE").cuda_graphs.value is True
    both = serving(enforce_eager=True, optimization_level=0, compilation_config__cudagraph_mode="NONE")
    assert both.cuda_graphs.setting.key == "enforce_eager"
    lvl = serving(optimization_level=0, compilation_config__cudagraph_mode="NONE")
    assert lvl.cuda_graphs.setting.key == "optimization_level"
    assert serving(enforce_eager=False, optimization_level=3).cuda_graphs.value is True


def test_effective_attention_backend_from_the_environment():
    env = {fw.ENV_ATTENTION_BACKEND: _set(fw.ENV_ATTENTION_BACKEND, fw.ENV_ATTENTION_BACKEND, "XFORMERS")}
    assert serving(version="0.15.0", env=env).attention_backend.value == "XFORMERS"
    assert serving(version="0.16.0", env=env).attention_backend is None
    assert serving(version="0.15.0", env=env, attention_backend="FLASHINFER").attention_backend.value == "FLASHINFER"
    templated = {fw.ENV_ATTENTION_BACKEND: env[fw.ENV_ATTENTION_BACKEND].with_(templated=True)}
    assert serving(version="0.15.0", env=templated).attention_backend is None


def test_effective_yaml_false_lines_dropped_by_the_config_loader():
    s = serving(kind="vllm-yaml", version="0.28.0", enable_prefix_caching=_set(
        "enable_prefix_caching", "enable_prefix_caching", False))
    assert s.prefix_caching.value is True and s.prefix_caching.prov.kind == "derived"
    assert s.prefix_caching.prov.note == (
        "`enable_prefix_caching: false` (c.yaml:3:1) is dropped by vLLM 0.28.0's config loader; "
        "default of vLLM 0.28.0 (vllm/engine/arg_utils.py)")
    kept = serving(kind="vllm-yaml", version="0.28.0", enable_prefix_caching=_set(
        "enable_prefix_caching", "enable-prefix-caching", False))
    assert kept.prefix_caching.value is False and kept.prefix_caching.prov.kind == "file"
    dropped = serving(kind="vllm-yaml", version="0.28.0", kv_cache_dtype=_set("kv_cache_dtype", "kv_cache_dtype", False))
    assert dropped.kv_cache_dtype.value == "auto"  # no fallback: as if unset
    args = serving(kind="vllm-args", version="0.28.0", enable_prefix_caching=_set(
        "enable_prefix_caching", "enable_prefix_caching", False))
    assert args.prefix_caching.value is False
