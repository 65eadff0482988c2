# ruff: noqa: E501  (log lines are written whole, as the layers print them)
"""The failure messages of the layers around a vLLM server get their category (issue 11).

``tests/data/layer_messages.yaml`` holds what PyTorch, transformers, Ray, Kubernetes, Cloud Run and
Docker / the NVIDIA container toolkit print for a failure, read from their source or their documentation
(its header says how). Each is rendered in the context it comes in:

- ``vllm``: inside a vLLM server's start-up that reached the message's phase, as a logged traceback and
  as a bare one (the rendering of ``tests/test_analyzers_vllm_wording.py``); a C++ warning as glog
  prints it; torch elastic's failure report as it is printed;
- ``raylet``: the start-up, then the lines a Ray driver relays, prefixed ``(raylet)`` /
  ``(autoscaler +Ns)`` / ``(scheduler +Ns)``;
- ``k8s``: the container's log (the start-up up to the phase), then ``kubectl describe pod``: the
  container's state and the Events table;
- ``cloudrun``: the start-up, then Cloud Run's system line; ``gcloud``: ``gcloud run deploy``'s output;
- ``docker``: ``docker run``'s output, ending ``docker: Error response from daemon: ...``.

Severity is ``DEFAULT`` everywhere: the analyzers must read the text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.test_analyzers_vllm_wording import PHASES, V1_LIFE, diagnosed, render

DATA = Path(__file__).parent / "data" / "layer_messages.yaml"
#: Read with libyaml where PyYAML has it (as ``mcp_tools.incident`` reads incidents): a tenth of the
#: pure-Python loader's time, which every worker would spend collecting.
MESSAGES: list[dict[str, Any]] = yaml.load(
    DATA.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)
)["messages"]
LAYERS = {"torch", "transformers", "ray", "kubernetes", "cloudrun", "docker"}
ENG = "(EngineCore_DP0 pid=212) "
POD = "gemma-0"


def _start(phase: str) -> list[str]:
    """vLLM's start-up (V1) up to and including ``phase``'s milestones."""
    out = []
    for p in PHASES[: PHASES.index(phase) + 1]:
        for proc, where, text in V1_LIFE[p]:
            out.append(f"{proc}INFO 05-29 19:12:40 [{where}] {text}" if where else f"{proc}{text}")
    return out


def _container_log(m: dict[str, Any]) -> list[str]:
    """What the container printed before the layer's message: nothing when it never started."""
    return [] if m["phase"] == "args" else _start(m["phase"])


def _vllm(m: dict[str, Any], form: str) -> list[str]:
    if m.get("kind") == "raw":
        return _start(m["phase"]) + m["message"].split("\n")
    if m.get("source") == "glog":  # torch's C++ core: "[rank1]:[E529 19:22:40.123 212 file.cpp:632] ..."
        prefix = (
            f"{ENG}[E ProcessGroupNCCL.cpp:821] "
            if form == "bare"
            else f"{ENG}[rank1]:[E529 19:22:40.118203421 ProcessGroupNCCL.cpp:632] "
        )
        return _start(m["phase"]) + [prefix + t for t in m["message"].split("\n")]
    if m.get("kind") == "log" and m.get("level") == "WARNING" and "torch" in m["tags"]:
        # Python's warnings module, as torch.cuda warns: "<file>:<line>: UserWarning: <message>"
        file = m["where"].split()[0].split(":")[0]
        first = f"/usr/local/lib/python3.12/dist-packages/{file}:235: UserWarning: "
        text = m["message"].split("\n")
        tail = [first + text[0], *text[1:]] if form == "logged" else [first, *text]
        return _start(m["phase"]) + tail + ["  warnings.warn("]
    frame = m.get("frame") or "vllm/v1/engine/core.py:83"
    as_vllm = {**m, "where": frame + "@v0.11.0", "function": m.get("function") or "__init__", "v0": False}
    return render(as_vllm, form)


def _raylet(m: dict[str, Any]) -> list[str]:
    if m.get("kind") == "raise":
        return _vllm(m, "logged")
    prefix = {"autoscaler": "(autoscaler +1m12s) ", "driver": "(scheduler +8s) "}.get(
        m.get("source", ""), "(raylet) "
    )
    lines = []
    for _ in range(int(m.get("repeat", 1))):
        lines += [prefix + t for t in m["message"].split("\n")]
    return _start(m["phase"]) + ["INFO worker.py:1841 -- Connected to Ray cluster."] + lines


def _k8s(m: dict[str, Any]) -> list[str]:
    state = ["    State:          Running", "      Started:      Thu, 29 May 2025 19:12:31 +0000"]
    if m.get("kind") == "state":
        last = "OOMKilled" if "OOMKilled" in (m["reason"], m.get("function")) else "Error"
        state = [
            "    State:          Waiting",
            f"      Reason:       {m['reason'] if m['reason'] != 'OOMKilled' else 'CrashLoopBackOff'}",
            *([f"      Message:      {m['message']}"] if m["reason"] == "CrashLoopBackOff" else []),
            "    Last State:     Terminated",
            f"      Reason:       {last}",
            f"      Exit Code:    {137 if last == 'OOMKilled' else 1}",
        ]
    elif m["reason"] == "BackOff" and "restarting" in m["message"]:
        state = [
            "    State:          Waiting",
            "      Reason:       CrashLoopBackOff",
            "    Last State:     Terminated",
            "      Reason:       Error",
            "      Exit Code:    1",
        ]
    elif m["phase"] == "args":
        state = [
            "    State:          Waiting",
            "      Reason:       ContainerCreating"
            if "image" not in m["message"].lower()
            else "      Reason:       ImagePullBackOff",
        ]
        if m["reason"] in ("FailedScheduling", "NotTriggerScaleUp", "FailedScaleUp"):
            state = []
    events = [
        "Events:",
        "  Type     Reason     Age                From               Message",
        "  ----     ------     ----               ----               -------",
    ]
    if m.get("kind") == "event":
        source = m.get("function") or "kubelet"
        count = int(m.get("repeat", 1))
        age = f"12s (x{count} over 2m)" if count > 1 else "12s"
        events.append(f"  {m['event_type']:<8} {m['reason']:<10} {age:<18} {source:<18} {m['message']}")
    describe = [
        f"Name:             {POD}",
        "Namespace:        default",
        "Containers:",
        "  vllm:",
        "    Image:          vllm/vllm-openai:v0.11.0",
        *state,
        "    Limits:",
        "      memory:          32Gi",
        "      nvidia.com/gpu:  1",
        *events,
    ]
    return _container_log(m) + describe


def _cloudrun(m: dict[str, Any]) -> list[str]:
    return _start(m["phase"]) + m["message"].split("\n")


def _gcloud(m: dict[str, Any]) -> list[str]:
    return _container_log(m) + [
        "Deploying container to Cloud Run service [gemma] in project [serving] region [us-central1]",
        "Deploying...",
        "  Creating Revision..........................failed",
        "Deployment failed",
        f"ERROR: (gcloud.run.deploy) {m['message']}",
    ]


def _docker(m: dict[str, Any]) -> list[str]:
    pulled = (
        []
        if m["category"] == "image_pull"
        else [
            "v0.11.0: Pulling from vllm/vllm-openai",
            "Digest: sha256:5b0f3c1e9d6a4f2b8c7e1d0a9f8e7d6c5b4a39281706f5e4d3c2b1a09f8e7d6c",
            "Status: Downloaded newer image for vllm/vllm-openai:v0.11.0",
        ]
    )
    return [
        "$ docker run --gpus all -p 8000:8000 vllm/vllm-openai:v0.11.0 --model google/gemma-3-12b-it",
        "Unable to find image 'vllm/vllm-openai:v0.11.0' locally",
        *pulled,
        f"docker: Error response from daemon: {m['message']}.",
        "Run 'docker run --help' for more information",
    ]


def layer_render(m: dict[str, Any], form: str) -> list[str]:
    """The message's log in the shape its layer prints it."""
    shape = m["shape"]
    if shape == "vllm":
        return _vllm(m, form)
    return {"raylet": _raylet, "k8s": _k8s, "cloudrun": _cloudrun, "gcloud": _gcloud, "docker": _docker}[
        shape
    ](m)


def forms(m: dict[str, Any]) -> tuple[str, ...]:
    """How a message is rendered: a vLLM-shaped raise or log both as logged and bare, else as printed."""
    return (
        ("logged", "bare") if m["shape"] == "vllm" and m.get("kind") in ("raise", "log") else ("as-printed",)
    )


CASES = [pytest.param(m, form, id=f"{m['id']}-{form}") for m in MESSAGES for form in forms(m)]


@pytest.mark.parametrize(("m", "form"), CASES)
def test_layer_message_gets_its_category(m: dict[str, Any], form: str) -> None:
    lines = layer_render(m, form)
    assert diagnosed(lines) == m["category"], "\n".join(lines)


def test_the_table_covers_every_layer_and_names_its_source() -> None:
    assert {m["layer"] for m in MESSAGES} == LAYERS
    for layer in LAYERS:
        assert sum(m["layer"] == layer for m in MESSAGES) >= 5, layer
    for m in MESSAGES:
        assert m["phase"] in PHASES and m["shape"] in (
            "vllm",
            "raylet",
            "k8s",
            "cloudrun",
            "gcloud",
            "docker",
        ), m["id"]
        assert m["where"] and m["tags"] and m["template"] and m["message"], m["id"]
