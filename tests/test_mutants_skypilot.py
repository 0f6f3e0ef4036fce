"""SkyPilot task YAML (sits_doctor/loaders/skypilot.py): edge cases that mutation testing showed no
test noticing — an env var left empty for ``--env``, a ``num_nodes`` that is not a number, where
the ``setup`` pin is reported, and whether the accelerator is a known value."""

from __future__ import annotations

from sits_doctor.loaders import skypilot
from sits_doctor.source_yaml import parse_yaml

TASK = """envs:
  MODEL: org/m
  LEN:
resources:
  accelerators: A100-80GB:4
num_nodes: {nodes}
setup: |
  pip install "vllm==0.8.5" ray
run: |
  vllm serve $MODEL --max-model-len $LEN \\
    -tp $SKYPILOT_NUM_GPUS_PER_NODE --pipeline-parallel-size $SKYPILOT_NUM_NODES
"""


def _plan(text: str):
    (doc,) = parse_yaml(text, "t.yaml")
    (plan,) = skypilot.plans(doc)
    return plan


def test_an_env_left_empty_is_unknown_until_the_launch_passes_it():
    # SkyPilot requires `--env LEN=...` at launch for an env written without a value
    plan = _plan(TASK.format(nodes=2))
    length = plan.settings["max_model_len"]
    assert (length.value, length.templated) == ("$LEN", True)
    assert plan.env["LEN"].value is None and plan.env["LEN"].templated
    assert not plan.env["MODEL"].templated and plan.model_ref.value == "org/m"
    assert plan.unchecked == 1


def test_num_nodes_that_is_not_an_integer_sets_no_variable():
    for nodes in ("true", '"2"'):
        plan = _plan(TASK.format(nodes=nodes))
        assert "SKYPILOT_NUM_NODES" not in plan.env, nodes
        pp = plan.settings["pipeline_parallel_size"]
        assert (pp.value, pp.templated) == ("$SKYPILOT_NUM_NODES", True), nodes
    plan = _plan(TASK.format(nodes=2))
    assert plan.settings["pipeline_parallel_size"].value == 2
    assert str(plan.env["SKYPILOT_NUM_NODES"].prov) == "set by SkyPilot from num_nodes (t.yaml:6:1)"


def test_the_setup_pin_is_reported_at_the_setup_key():
    plan = _plan(TASK.format(nodes=2))
    pin = plan.pin
    assert (pin.value, pin.raw, str(pin.prov)) == ("0.8.5", "pip install vllm==0.8.5", "t.yaml:7:1")


def test_a_written_accelerator_is_a_known_value_at_its_line():
    plan = _plan(TASK.format(nodes=2))
    product, count = plan.hardware["gpu_product"], plan.hardware["gpu_count"]
    assert (product.value, product.templated, str(product.prov)) == ("A100-80GB", False, "t.yaml:5:3")
    assert (count.value, count.templated) == ("4", False)
    assert str(plan.env["SKYPILOT_NUM_GPUS_PER_NODE"].prov) == "set by SkyPilot from accelerators (t.yaml:5:3)"


def test_without_num_nodes_the_task_runs_on_one_node():
    plan = _plan(TASK.replace("num_nodes: {nodes}\n", ""))
    assert plan.settings["pipeline_parallel_size"].value == 1
    assert str(plan.env["SKYPILOT_NUM_NODES"].prov) == "set by SkyPilot from num_nodes (SkyPilot's default)"


def test_a_run_key_alone_is_not_a_task():
    assert skypilot.is_skypilot_task({"run": "vllm serve m", "resources": {"accelerators": "L4"}})
    for data in ({"run": "vllm serve m"},  # no other task key: could be anything
                 {"run": ["vllm", "serve"], "resources": {}},  # run is a script, not a list
                 {"apiVersion": "v1", "kind": "Pod", "run": "x", "resources": {}}):
        assert not skypilot.is_skypilot_task(data), data
