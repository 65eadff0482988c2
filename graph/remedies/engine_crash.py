"""engine_crash: a fresh revision for a crash while serving; a person first for a crash a restart repeats
(in the start-up, from the image's code or kernels, or a GPU kernel that faulted); eager mode when the
crash is a CUDA fault, and first when it happened inside a CUDA graph or torch.compile's compiler; a
person first when the host removed what the engine's processes share."""

from __future__ import annotations

from graph.diagnosis import Diagnosis
from graph.observation import Observation
from graph.remedies.base import escalate, fact
from graph.remedies.engine_hung import restart
from graph.remedies.planner import Capacity, flags_option
from mcp_tools.remediation import RemediationPlan

#: Why a restart would crash the same way again, and what a person does instead: (action, why).
_WHY_A_RESTART_REPEATS = {
    # The start crashes before the server is up: the image, the driver or the flags of this revision
    # do not start, and a person must compare them with the last start.
    "in_startup": (
        "The engine crashes during its start-up, before the server is up, so a restart repeats the same "
        "start. Compare this revision's image, driver and flags with the last revision that started, roll "
        "back to it if one served, and report the traceback upstream.",
        "the engine crashed in its start-up: a restart starts it the same way",
    ),
    # The image's code or a kernel of this build fails on this device: a fresh start of the same
    # revision reaches the same import or kernel and dies again.
    "repeats_on_restart": (
        "The engine died of something a restart repeats (a module missing from the image, or a GPU kernel "
        "that rejects this device or its arguments). Roll back to the last revision that served, or fix "
        "the image or pick another kernel backend, and report it upstream.",
        "the engine's crash comes from this revision's image or kernels: a restart repeats it",
    ),
    # A kernel that faulted while the engine served (an illegal address, a device-side assert): a bug of
    # this build with this model or input. The platform already starts a crashed instance again, and the
    # same request faults it the same way (all 17 such crashes in the corpus's dev split accept a person,
    # 12 a restart).
    "cuda_fault": (
        "A GPU kernel faulted while the engine ran (an illegal memory access, a device-side assert, a launch "
        "failure): a bug of this vLLM build with this model, its kernels or the driver, which the same "
        "requests hit again. Report the trace upstream with the model and flags; roll back to the last "
        "revision that served, or restart (and try eager mode) to buy time.",
        "a CUDA kernel faulted: a restart only lasts until the same request comes again",
    ),
}


def propose(diag: Diagnosis, obs: Observation, cap: Capacity) -> list[RemediationPlan]:
    fresh = restart("the engine died for a reason its configuration does not explain: start a fresh revision")
    # the host's setting, not the service's: a restart lasts only until it happens again
    if fact(diag, "host_removed_ipc"):
        return [
            escalate(
                "The host removed the semaphores or shared memory the engine's processes share while it "
                "ran: set RemoveIPC=no in /etc/systemd/logind.conf (or stop whatever cleans /dev/shm), then "
                "restart.",
                "the host took away what the engine's processes share",
            ),
            fresh,
        ]
    out = [fresh]
    # the first fact (in this order) that says a restart crashes the same way again
    repeats = next((why for key, why in _WHY_A_RESTART_REPEATS.items() if fact(diag, key)), None)
    if repeats:  # a person first; a restart stays an option below
        out = [escalate(*repeats), fresh]
    if fact(diag, "in_compile"):  # a person first (a start-up crash); eager mode does without the compiler
        eager = flags_option(
            cap,
            {"--enforce-eager": True},
            "torch.compile failed while the engine started: serve eagerly (no compile, no CUDA graphs)",
        )
        return [
            escalate(
                "torch.compile's compiler failed while the engine started, so a restart fails the same way. "
                "Serving with --enforce-eager (the next option) goes around it at some speed; report the "
                "traceback upstream, or roll back to the last image that started.",
                "torch.compile failed in the start-up: a restart compiles the same way",
            ),
            eager,
            *out[-1:],
        ]
    if fact(diag, "in_cuda_graph"):  # it died replaying or capturing a CUDA graph: run without them first
        eager = flags_option(
            cap,
            {"--enforce-eager": True},
            "the engine crashed inside a CUDA graph: run eagerly, without graphs",
        )
        return [eager, *out]
    if fact(diag, "cuda_fault"):
        out.append(
            flags_option(
                cap, {"--enforce-eager": True}, "CUDA faults often come from graph capture: run eagerly"
            )
        )
    return out
