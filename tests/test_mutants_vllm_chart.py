"""Values of vLLM's example Helm chart (sits_doctor/loaders/vllm_chart.py): edge cases that
mutation testing showed no test noticing — which commands make a file the chart's values, a
command that does not start vLLM, and where the image is reported."""

from __future__ import annotations

from sits_doctor.loaders import vllm_chart
from sits_doctor.source_yaml import parse_yaml


def _doc(text: str):
    (doc,) = parse_yaml(text, "values.yaml")
    return doc


def test_the_api_server_module_as_the_third_word_is_the_chart():
    doc = _doc('image:\n  repository: registry.local/llm\n'
               '  command: ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "org/m"]\n')
    assert vllm_chart.is_vllm_chart_values(doc.data)
    (plan,) = vllm_chart.plans(doc)
    assert (plan.entry, plan.model_ref.value) == ("python -m vllm.entrypoints.openai.api_server", "org/m")
    assert plan.image.value == "registry.local/llm:latest"


def test_vllm_named_only_in_a_later_argument_is_not_the_chart():
    doc = _doc('image:\n  repository: registry.local/router\n'
               '  command: ["/app/router", "--port", "8080", "--backend=http://vllm:8000"]\n')
    assert not vllm_chart.is_vllm_chart_values(doc.data)


def test_a_vllm_image_whose_command_does_not_start_vllm_gives_no_plan():
    doc = _doc('image:\n  repository: vllm/vllm-openai\n  tag: v0.9.2\n  command: ["sleep", "infinity"]\n')
    assert vllm_chart.is_vllm_chart_values(doc.data)
    assert vllm_chart.plans(doc) == []


def test_the_image_is_reported_at_its_tag_else_its_repository_else_the_image_key():
    cases = (('image:\n  repository: vllm/vllm-openai\n  tag: v0.9.2\n  command: ["vllm", "serve", "m"]\n',
              "vllm/vllm-openai:v0.9.2", "values.yaml:3:3"),
             ('image:\n  repository: vllm/vllm-openai\n  command: ["vllm", "serve", "m"]\n',
              "vllm/vllm-openai:latest", "values.yaml:2:3"),
             ('x: 1\nimage:\n  command: ["vllm", "serve", "m"]\n', ":latest", "values.yaml:2:1"))
    for text, shown, where in cases:
        (plan,) = vllm_chart.plans(_doc(text))
        assert (plan.image.value, str(plan.image.prov)) == (shown, where), text
