from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_tools.errors import UserError
from mcp_tools.incident import ServiceSpec
from mcp_tools.remediation import PlanStep, RemediationKind
from mcp_tools.spec_ops import apply_steps, get_flag, get_model, render, set_flag, spec_diff

ARGS = ["--model=/mnt/models/gemma-4-12B-it", "--max-model-len", "32768", "--enforce-eager"]


def test_get_flag_reads_both_spellings_and_bare_flags() -> None:
    assert get_flag(ARGS, "--max-model-len") == "32768"
    assert get_flag(ARGS, "max_model_len") == "32768"
    assert get_flag(ARGS, "--enforce-eager") is True
    assert get_flag(ARGS, "--quantization") is None
    assert get_model(ARGS) == "/mnt/models/gemma-4-12B-it"
    assert get_model(["serve", "google/gemma-4-12B-it", "--port=8080"]) == "google/gemma-4-12B-it"


def test_set_flag_replaces_removes_and_adds() -> None:
    out = set_flag(ARGS, "--max-model-len", 8192)
    assert out == ["--model=/mnt/models/gemma-4-12B-it", "--enforce-eager", "--max-model-len=8192"]
    assert "--enforce-eager" not in set_flag(ARGS, "--enforce-eager", None)
    assert set_flag([], "--kv-cache-dtype", "fp8") == ["--kv-cache-dtype=fp8"]


def test_apply_steps_and_diff() -> None:
    spec = ServiceSpec(name="gemma", gpu_type="nvidia-l4", args=list(ARGS), max_instances=1)
    steps = [
        PlanStep(kind=RemediationKind.SET_MODEL, change={"model": "/mnt/models/gemma-4-12B-it-FP8"}),
        PlanStep(kind=RemediationKind.SET_VLLM_ARGS, change={"--kv-cache-dtype": "fp8"}),
        PlanStep(kind=RemediationKind.SET_PROBE, change={"failure_threshold": 5}),
        PlanStep(kind=RemediationKind.ESCALATE, change={}, why="ask for quota"),
    ]
    new = apply_steps(spec, steps)
    assert get_model(new.args) == "/mnt/models/gemma-4-12B-it-FP8"
    assert get_flag(new.args, "--kv-cache-dtype") == "fp8"
    assert new.startup_probe is not None and new.startup_probe.failure_threshold == 5
    assert spec.args == ARGS  # the input is not changed
    diff = spec_diff(spec, new)
    assert "+- --kv-cache-dtype=fp8" in diff and "--- service (current)" in diff
    assert spec_diff(spec, spec) == ""


@pytest.mark.parametrize(
    ("step", "needle"),
    [
        (PlanStep(kind=RemediationKind.SET_SCALING, change={"min_instances": -1}), "whole number >= 0"),
        # Cloud Run needs at least one instance to serve: 0 is never a valid maximum
        (PlanStep(kind=RemediationKind.SET_SCALING, change={"max_instances": 0}), "whole number >= 1"),
        (PlanStep(kind=RemediationKind.SET_SCALING, change={"min_instances": 3}), "above max_instances"),
        (PlanStep(kind=RemediationKind.SET_RESOURCES, change={"disk": "1Ti"}), "unknown change key"),
        (PlanStep(kind=RemediationKind.SET_VLLM_ARGS, change={"--model": "x"}), "use a set_model step"),
        (PlanStep(kind=RemediationKind.SET_MODEL, change={}), "non-empty 'model'"),
    ],
)
def test_bad_steps_are_user_errors(step: PlanStep, needle: str) -> None:
    spec = ServiceSpec(args=list(ARGS), max_instances=1)
    with pytest.raises(UserError, match=needle):
        apply_steps(spec, [step])


def test_the_diff_people_approve_hides_secrets_but_the_specs_keep_them() -> None:
    spec = ServiceSpec(args=[*ARGS, "--api-key", "s3cr3tvalue123"], env={"HF_TOKEN": "plain-token-value"})
    new = apply_steps(spec, [PlanStep(kind=RemediationKind.SET_VLLM_ARGS, change={"--max-model-len": 8192})])
    diff = spec_diff(spec, new)
    assert "--max-model-len=8192" in diff
    assert "s3cr3tvalue123" not in diff and "plain-token-value" not in diff
    assert "s3cr3tvalue123" in new.args and new.env["HF_TOKEN"] == "plain-token-value"  # applied as is


_TEXT = st.text(st.characters(blacklist_categories=["Cs"]), max_size=60)


@settings(max_examples=80, deadline=None)
@given(name=_TEXT, args=st.lists(_TEXT, max_size=4), env=st.dictionaries(_TEXT, _TEXT, max_size=3))
def test_render_reads_back_as_the_spec_it_rendered(name: str, args: list[str], env: dict[str, str]) -> None:
    """Whatever emitter renders it (libyaml's where PyYAML has it), the rendering is YAML that reads
    back as the same spec: apply's comparison of approved and applied specs relies on it."""
    spec = ServiceSpec(name=name, args=args, env=env, gpu_type="nvidia-l4", cpu=8, memory="32Gi")
    text = render(spec)
    assert yaml.safe_load(text) == spec.model_dump(mode="json", exclude_none=True)
    assert render(ServiceSpec.model_validate(yaml.safe_load(text))) == text
