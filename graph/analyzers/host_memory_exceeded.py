"""host_memory_exceeded: the container's RAM (not the GPU's) ran out.

Wordings: Cloud Run "Memory limit of 32768 MiB exceeded with 33012 MiB used. Consider increasing the
memory limit, see https://cloud.google.com/run/docs/configuring/memory-limits" (as quoted in
dart-lang/pub-dev#9554, googleapis/repo-automation-bots#3105); the kernel's "Out of memory: Killed
process"; Kubernetes "OOMKilled" / exit code 137; a bare "Killed" from the shell. A kill signal alone
is weak evidence (a probe also ends in a kill) and yields to any specific cause.
"""

from __future__ import annotations

import re

from graph.analyzers.base import Finding, finding, match_conditions, view
from graph.observation import Observation

STRONG = re.compile(
    r"Memory limit of \d+\s*\w* exceeded|Out of memory: Killed process|oom-kill|OOMKilled|oom_kill_process"
    r"|memory cgroup out of memory|Container memory limit exceeded"
    # Ray's memory monitor (host RAM, not GPU): "2 Workers (tasks / actors) killed due to memory
    # pressure (OOM)", "Task was killed due to the node running low on memory",
    # ray.exceptions.OutOfMemoryError
    r"|killed due to memory pressure|running low on memory|ray\.exceptions\.OutOfMemoryError"
    r"|ray-oom-prevention|Memory on the node \(IP: [^)]*\) .* was \d+\.\d+GB / \d+\.\d+GB"
    # shared memory (/dev/shm is host RAM; docker's default 64 MB): NCCL "failed to extend /dev/shm",
    # "unable to write to file </torch_...>: No space left on device"
    r"|failed to extend /dev/shm|/dev/shm\S* .*No space left on device|No space left on device.*shm"
    r"|Cannot allocate memory|std::bad_alloc|(?<![\w.])MemoryError\b"
    r"|exceeded (?:its|the) memory limit|killed because it exceeded|Bus error.*shm|shm.*Bus error",
    re.IGNORECASE,
)
WEAK = re.compile(
    r"^\s*Killed\s*$|exit code 137|exited with code 137|terminated on signal 9\b|signal: killed"
    r"|Bus error \(core dumped\)|killed by signal: Bus error"
)
WEAK_PREFILTER = re.compile(r"Killed|killed|exit|signal|Bus error")


def analyze(obs: Observation) -> list[Finding]:
    v = view(obs)
    strong = list(v.grep(STRONG))
    conds = match_conditions(obs, STRONG)
    if strong or conds:
        f = finding(
            "host_memory_exceeded",
            0.92 if strong else 0.85,
            "The container ran out of host memory (RAM), not GPU memory"
            + (f" (line {strong[0].n})" if strong else "")
            + ": the instance was killed.",
            strong[:3],
            pattern=STRONG,
            analyzer="host_memory_exceeded",
            extra=conds[:1],
        )
        if not strong:
            f.first_line = f.last_line = v.total + 1
        return [f]
    weak = list(v.grep(WEAK, prefilter=WEAK_PREFILTER))
    if not weak:
        return []
    return [
        finding(
            "host_memory_exceeded",
            0.55,
            f"The process was killed with SIGKILL (line {weak[0].n}), "
            "as the kernel does when memory runs out.",
            weak[:2],
            pattern=WEAK,
            analyzer="host_memory_exceeded",
            specific=False,
        )
    ]
