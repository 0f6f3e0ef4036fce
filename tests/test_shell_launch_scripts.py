"""Launch scripts read as the shell reads them (issue 27 #8).

- A quote inside a here-document, a ``$(...)`` or a ``${...}`` never hides the commands after it;
  redirections glued to words (``cat<<EOF>/tmp/x``, ``2>&1``) are redirections, not arguments.
- A value the script computes in a way the loader does not follow is unknown, never invalid: every
  expansion below is run through bash itself, and the loader must give bash's answer or say it
  does not know (the ``templated`` mark), never a third value that SITS201 would call invalid.
- A flag written with a look-alike dash (any Unicode dash or minus sign, anywhere in the name) is
  reported with the character's code point and fixed to ASCII.
"""

from __future__ import annotations

import shutil
import subprocess
import unicodedata

import pytest

from conftest import write
from sits_doctor import CheckOptions, check
from sits_doctor.fixer import apply_edits
from sits_doctor.loaders import shell
from sits_doctor.loaders.script import parse_script, script_plans
from sits_doctor.loaders.vllm_args import LOOKALIKE_DASHES

BASH = shutil.which("bash")
needs_bash = pytest.mark.skipif(BASH is None, reason="the oracle is bash itself")
SERVE = "vllm serve m --swap-space 4\n"


def plans_of(text: str):
    return script_plans(parse_script(text, "serve.sh"))


def bash_accepts(text: str) -> bool:
    return subprocess.run([BASH, "-n"], input=text, text=True, capture_output=True, timeout=30).returncode == 0


# --- nothing after a quote in a here-document or a substitution goes missing ----------------------

PRELUDES = [
    "cat<<EOF >/tmp/notes\ndon't\nEOF\n",
    "cat <<EOF>/tmp/notes\ndon't\nEOF\n",
    "cat >/tmp/notes<<EOF\ndon't\nEOF\n",
    "cat 0<<EOF\ndon't\nEOF\n",
    "exec 3<<EOF\nit's\nEOF\n",
    "X=$(cat <<'EOF'\nit's 1) done\nEOF\n)\n",
    "X=$(cat <<EOF\nsmile :-( don't\nEOF\n)\n",
    "X=\"$(cat <<EOF\nwon't (\nEOF\n)\"\n",
    "X=$(echo 'a)b')\n",
    "X=$(echo \")\")\n",
    "X=$(echo \\))\n",
    "X=$(# a comment's )\necho 1)\n",
    "X=$(case $1 in a) echo \"it's\";; esac)\n",
    "echo ${X:-'a}b'}\n",
    "echo \"${X:-\"}\"}\"\n",
    "echo $'it\\'s'\n",
    "echo `echo \\`echo it\\'s\\``\n",
    "cat <<EOF | tee /tmp/notes 2>&1\ndon't\nEOF\n",
]


@pytest.mark.parametrize("prelude", PRELUDES)
def test_a_quote_inside_a_here_document_or_a_substitution_hides_nothing(prelude):
    if BASH is not None:
        assert bash_accepts(prelude + SERVE)  # the input is real shell
    plans = plans_of(prelude + SERVE)
    assert [(p.entry, p.anchor.line) for p in plans][-1:] == [("vllm serve", prelude.count("\n") + 1)], plans
    assert plans[-1].settings["swap_space"].value == 4


@pytest.mark.parametrize("prelude", PRELUDES)
def test_the_words_after_them_are_where_they_are_written(prelude):
    text = prelude + SERVE
    words = [w for w in shell.split(text) if not w.operator]
    tail = [(w.text, text[w.start:w.end]) for w in words[-5:]]
    assert tail == [(t, t) for t in ("vllm", "serve", "m", "--swap-space", "4")]


@pytest.mark.parametrize("opening", ["cat>/tmp/c.yaml<<EOF", "cat<<EOF>/tmp/c.yaml", "cat <<EOF >>/tmp/c.yaml",
                                     "cat 0<<'EOF' 1>/tmp/c.yaml", "tee /tmp/c.yaml<<EOF >/dev/null"])
def test_a_config_written_with_glued_redirections_is_read(opening):
    text = f"{opening}\nmodel: m\nswap-space: 4\nEOF\nvllm serve --config /tmp/c.yaml\n"
    if BASH is not None:
        assert bash_accepts(text)
    labels = [p.label for p in plans_of(text)]
    assert any("here-document at serve.sh:2" in label for label in labels), labels


def test_redirections_are_no_arguments_and_end_no_command():
    (plan,) = plans_of("vllm serve m 2>&1 --max-model-len 4096 >/var/log/v.log </dev/null &>>all.log\n")
    assert plan.settings["max_model_len"].value == 4096
    assert plan.positional == 1  # the model; no '>', '/var/log/v.log' or '1' left over
    words = shell.split("a 2>&1 b>c <<<x d&>e")
    assert [(w.text, w.redirect) for w in words] == [
        ("a", False), ("2>&", True), ("1", False), ("b", False), (">", True), ("c", False), ("<<<", True),
        ("x", False), ("d", False), ("&>", True), ("e", False)]
    assert not any(w.operator for w in words)


# --- what the loader cannot expand is unknown, never a wrong value -------------------------------

SETUPS = ["", "A=8192\n", "A=8192\nB=4096\n", "B=4096\n", "A=\nB=4096\n", "ARR=(1 2)\nA=8192\n", "export A=8192\n",
          "R=A\nA=8192\n"]
EXPRESSIONS = [
    "${A:-${B:-4096}}", "${A:=${B:-4096}}", "${A-${B-4096}}", "${N:-${A:-4096}}", "${A:-$B}", "${N:-\"$B\"}",
    "${A:-\"4096\"}", "${N:-'4096'}", "${N:-40\"96\"}", "${X:=4096}", "${A:+4096}", "${#ARR[@]}", "${#A}", "${ARR[0]}",
    "`echo 4096`", "`echo $A`", "$(echo $A)", "$((A+1))", "$[A+1]", "${A%2}", "${A#8}", "${A/8/9}", "${A:1:2}",
    "${!R}", "$A$B", "${A}0", "${N:-${M:-${A:-4096}}}", "\"${A:-${B:-4096}}\"", "${N:-\"${B}\"}$A", "$1", "${1:-4096}",
    "${N:-40 96}", "\"${N:-40 96}\"", "${N:-\"40 96\"}",
]
USES = ["vllm serve m --max-model-len {e}\n", "V={e}\nvllm serve m --max-model-len $V\n",
        "vllm serve m --max-model-len={e}\n", "V=\"{e}\"\nvllm serve m --max-model-len \"${{V}}\"\n",
        "V={e}\nvllm serve m --max-model-len \"$V\" --port 8000\n"]


FAILS = "<bash stops>"


def bash_value(text: str) -> str | None:
    """What bash passes vLLM as --max-model-len's value when it runs ``text`` (None: no value;
    FAILS: bash stops at the expansion)."""
    script = 'vllm() { printf "%s\\0" "$@"; }\nset --\n' + text
    done = subprocess.run([BASH, "-c", script], env={}, text=True, capture_output=True, timeout=30)
    if done.returncode:
        return FAILS
    args = done.stdout.split("\0")[:-1]
    for k, arg in enumerate(args):
        if arg == "--max-model-len":
            return args[k + 1] if k + 1 < len(args) and args[k + 1] != "--port" else None
        if arg.startswith("--max-model-len="):
            return arg.partition("=")[2]
    return None


@needs_bash
@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_a_value_is_what_bash_makes_of_it_or_unknown(expression):
    for setup in SETUPS:
        for use in USES:
            text = setup + use.format(e=expression)
            meant = bash_value(text)
            (plan,) = plans_of(text)
            got = plan.settings.get("max_model_len")
            if got is None or got.templated:
                continue  # unknown: counted, not judged
            if meant is None:  # an empty unquoted expansion: the word is gone, the flag has no value
                assert got.raw is True, (text, got.raw)
            else:
                assert str(got.value) == meant, (text, got.value, meant)


@needs_bash
def test_no_false_sits201_on_expansions(tmp_path, monkeypatch):
    setup = "A=8192\nB=4096\nARR=(1 2)\nR=A\n"
    lines = [line for e in EXPRESSIONS
             if (bash_value(setup + (line := f"vllm serve m --max-model-len {e}\n")) or "").isdigit()]
    assert len(lines) > len(EXPRESSIONS) // 2
    write(tmp_path, "serve.sh", "#!/bin/bash\n" + setup + "".join(lines))
    monkeypatch.chdir(tmp_path)
    report = check(["serve.sh"], CheckOptions(isolated=True, select=["SITS201"], gpu="H100"))
    assert not report.errors and not report.internal_errors
    assert [f.render() for f in report.findings] == []


# --- look-alike dashes ----------------------------------------------------------------------------

MINUS_SIGNS = ("MINUS SIGN", "MODIFIER LETTER MINUS SIGN", "HEAVY MINUS SIGN", "SUPERSCRIPT MINUS", "SUBSCRIPT MINUS")


def _unicode_dashes() -> list[str]:
    """Every character this Python's Unicode database calls a dash (category Pd) but '-', and
    the minus signs."""
    return [chr(code) for code in range(0x80, 0x30000)
            if unicodedata.category(chr(code)) == "Pd" or unicodedata.name(chr(code), "") in MINUS_SIGNS]


DASHES = _unicode_dashes()


def test_the_look_alike_set_is_every_unicode_dash_and_minus():
    assert set(DASHES) <= set(LOOKALIKE_DASHES)
    # nothing more (a character a newer Unicode made a dash is unassigned in an older one)
    assert all(c in DASHES or unicodedata.category(c) == "Cn" for c in LOOKALIKE_DASHES)


def _flag_findings(tmp_path, monkeypatch, word: str, value: str = " 4096"):
    write(tmp_path, "serve.sh", f"#!/bin/bash\nvllm serve m {word}{value}\n")
    monkeypatch.chdir(tmp_path)
    report = check(["serve.sh"], CheckOptions(isolated=True, select=["SITS204"], targets=["vllm==0.11.0"]))
    assert not report.errors and not report.internal_errors
    return report.findings


@pytest.mark.parametrize("dash", DASHES, ids=lambda d: f"U+{ord(d):04X}")
@pytest.mark.parametrize("shape", ["{d}{d}max-model-len", "{d}max-model-len", "-{d}max-model-len",
                                   "--max{d}model-len", "{d}{d}max-model-len="])
def test_a_look_alike_dash_in_a_flag_is_reported_and_fixed(tmp_path, monkeypatch, dash, shape):
    word = shape.format(d=dash)
    value = "4096" if word.endswith("=") else " 4096"
    found = _flag_findings(tmp_path, monkeypatch, word, value)
    assert len(found) == 1, [f.render() for f in found]
    (f,) = found
    assert f"U+{ord(dash):04X}" in f.message, f.message
    text = (tmp_path / "serve.sh").read_text()
    fixed = apply_edits(text, [e for fx in f.fixes for e in fx.edits])
    assert fixed == f"#!/bin/bash\nvllm serve m --max-model-len{'=' if word.endswith('=') else ' '}4096\n"


@pytest.mark.parametrize("dash", ["\u2014", "\uff0d"])
def test_a_lone_look_alike_before_a_short_option_is_one_ascii_dash(tmp_path, monkeypatch, dash):
    found = _flag_findings(tmp_path, monkeypatch, f"{dash}tp", " 2")
    (f,) = found
    assert f.fixes[0].edits[0].new == "-tp", f.render()


# --- hostile input stays linear ---------------------------------------------------------------------

HOSTILE = {
    "nested substitutions": lambda k: "$(" * (k // 4) + ")" * (k // 4),
    "nested defaults": lambda k: "vllm serve m --max-model-len " + "${A:-" * (k // 10) + "}" * (k // 10),
    "unclosed quote": lambda k: "vllm serve m '" + "a" * k,
    "here-documents": lambda k: "cat <<EOF\n" * (k // 10),
    "groups": lambda k: "$(a)" * (k // 4),
    "case patterns": lambda k: "$(case a in " + "a) ;; " * (k // 6) + "esac)",
    "escaped backticks": lambda k: "`\\`" * (k // 3),
    "redirections": lambda k: "<" * k,
    "digits": lambda k: "1" * k + ">x",
}


def _best(run, times: int = 3) -> float:
    import time

    best = float("inf")
    for _ in range(times):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_scripts_are_read_in_linear_time(name):
    text = HOSTILE[name](100_000)
    baseline = _best(lambda: sum(1 for c in text if c in "$'\"`<"))  # one look at every character
    taken = _best(lambda: script_plans(parse_script(text, "serve.sh")), times=1)
    # a scan that went back over the text per group or per level would be thousands of times slower
    assert taken < 1000 * baseline, (name, taken, baseline)
