"""unsupported_config: drop the unknown flag or unsupported dtype / quantization, serve a checkpoint this
GPU runs, or (ranked last) a GPU that supports the configuration; a spec the platform's admission control
refused goes to a person."""

from __future__ import annotations

from typing import Any

from graph.diagnosis import Diagnosis
from graph.observation import Observation
from graph.remedies.base import K, distinct_plans, escalate, fact
from graph.remedies.catalog import CLOUD_RUN_GPUS, QUANT_SUFFIX, gpu_cc, larger_gpu, sibling_checkpoints
from graph.remedies.planner import Capacity, flags_option, gpu_option, model_option, planner_options
from mcp_tools.remediation import RemediationPlan
from mcp_tools.spec_ops import get_model


def propose(diag: Diagnosis, obs: Observation, cap: Capacity) -> list[RemediationPlan]:
    if fact(diag, "platform_refused"):  # the cluster's rules, not the engine's: a person reads them
        return [
            escalate(
                "The cluster's admission control refused the workload's spec before anything ran: change the "
                "spec as the cited refusal says (on GKE Autopilot, a GPU needs the "
                "cloud.google.com/gke-accelerator node selector) and deploy again.",
                "the platform would not take this spec",
            )
        ]
    needs = fact(diag, "request_needs_flags")
    if needs:  # the feature's flags: switches are set; a flag that takes a value is a person's choice
        valued = [f for f in needs if not f.startswith(("--enable-", "--disable-"))]
        if not valued:
            why = f"requests need {' and '.join(needs)}, which the server was not started with"
            return [flags_option(cap, dict.fromkeys(needs, True), why)]
        return [
            escalate(
                f"Clients use a feature this server was not started with: add {' and '.join(needs)} to the "
                f"serving flags ({', '.join(valued)} takes a value for this model, e.g. the tool-call parser "
                "of its family from vLLM's tool-calling docs) and deploy a new revision.",
                "requests need serving flags the server was not started with",
            )
        ]
    out: list[RemediationPlan] = []
    bad = fact(diag, "unrecognized_flags") or []
    stray = fact(diag, "unrecognized_words") or []
    if stray:
        # Words that are no flag: no flag change or other checkpoint starts this command line, and
        # which of its words to drop is the person's call (a positional written twice moves the rest).
        again = " The image's entrypoint may already be `vllm serve`: pass only the model and the flags."
        return [
            escalate(
                f"vLLM's command line does not take {' '.join(stray)!r}: fix the container's command and "
                f"arguments (a word written twice, or in the wrong place)."
                + (again if stray[0] == "serve" else ""),
                "the command line has words vLLM does not take",
            )
        ]
    if fact(diag, "no_device"):  # no GPU in the process: no flag or checkpoint makes it run there
        # First that the service asks for a GPU at all (a spec that already does is unchanged by this
        # step, and preflight passes over a plan that changes nothing), then a person for the rest. With
        # no spec observed, what it asks for is not known: a person only.
        wanted = cap.gpu or CLOUD_RUN_GPUS[0]
        ask = [gpu_option(cap, wanted, f"the engine saw no GPU: the service must ask for one ({wanted})")]
        return [
            *(ask if obs.service is not None else []),
            escalate(
                "The engine found no GPU although it was asked to run on one: check that the instance really "
                "gets its GPU (the Cloud Run service's GPU, the pod's nvidia.com/gpu limit, Ray's num_gpus "
                "for the replica) and that the image's CUDA runs on the host's driver.",
                "the process saw no GPU",
            ),
        ]
    if bad:
        out.append(
            flags_option(cap, dict.fromkeys(bad), f"this vLLM does not know {', '.join(bad)}: remove it")
        )
    asked = fact(diag, "asked_setting")
    if asked:  # the check says which setting to change, and its figures say to what
        why = (
            f"the engine's check asks for {asked['flag']}"
            if asked["to"] is True
            else f"the engine's check asks for another {asked['flag']}: {asked['to']}, the figure it compares"
        )
        if asked["flag"] == "--trust-remote-code":
            why += (
                " (it runs the checkpoint repository's own Python code: approve only for a repository you"
                " trust)"
            )
        out.append(flags_option(cap, {asked["flag"]: asked["to"]}, why))
    method = fact(diag, "checkpoint_quantization")
    if method and not (cap.flags and cap.flags.quantization):
        # A pre-quantized checkpoint served as a 16-bit one: say its format (bitsandbytes also needs
        # its loader in the releases that do not read it from the checkpoint's config).
        declare: dict[str, Any] = {"--quantization": method}
        if method == "bitsandbytes":
            declare["--load-format"] = "bitsandbytes"
        out.append(flags_option(cap, declare, f"the checkpoint is quantized ({method}): serve it as such"))
    divisor = fact(diag, "parallel_divisor")
    if divisor and 1 < divisor["size"] <= 1024:  # (a size no machine has is not a fact to act on)
        # the largest smaller size that divides what the model has (1 always does)
        size = next(k for k in range(divisor["size"] - 1, 0, -1) if divisor["total"] % k == 0)
        out.append(
            flags_option(
                cap,
                {divisor["flag"]: size},
                f"{divisor['total']} is not divisible by {divisor['flag']} {divisor['size']}: "
                f"{size} divides it",
            )
        )
    refused_flag = fact(diag, "refused_value_flag")
    if refused_flag and refused_flag not in bad:
        out.append(
            flags_option(
                cap,
                {refused_flag: None},
                f"vLLM's command line refuses the value given to {refused_flag}: serve without it (its "
                "default), or a person writes a value it takes",
            )
        )
    for flag in fact(diag, "implicated_flags") or []:
        if flag not in bad:
            out.append(
                flags_option(
                    cap,
                    {flag: None},
                    f"the failing check names {flag}, which the service sets: serve without it",
                )
            )
    refused16 = fact(diag, "float16_refused")
    if refused16:  # the model type's own dtype; a GPU without bfloat16 runs it in float32 (twice the memory)
        cc_now = gpu_cc(cap.gpu)
        dtype = "float32" if cc_now is not None and cc_now < 8.0 else "bfloat16"
        out.append(
            flags_option(
                cap,
                {"--dtype": dtype},
                f"{refused16} is numerically unstable in float16 (later vLLM releases refuse the pair): "
                f"serve it in {dtype}",
            )
        )
    no_bf16 = bool(fact(diag, "no_bfloat16"))
    need: float | None = fact(diag, "min_compute_capability")
    quantization = bool(fact(diag, "quantization"))
    refused = bool(fact(diag, "device_refused"))  # the GPU itself is refused: no flag helps
    if no_bf16 and not refused and not refused16:
        from mcp_tools.capacity.planner import FLOAT16_REFUSED_TYPES

        if cap.model is not None and cap.model.model_type in FLOAT16_REFUSED_TYPES:
            out.append(
                flags_option(
                    cap,
                    {"--dtype": "float32"},
                    f"this GPU has no bfloat16 and vLLM refuses {cap.model.model_type} in float16: use "
                    "float32 (twice the weights' memory)",
                )
            )
        else:
            out.append(flags_option(cap, {"--dtype": "float16"}, "this GPU has no bfloat16: use float16"))
    ref = get_model(obs.service.args) if obs.service else None
    prequantized = bool(ref and QUANT_SUFFIX.search(ref))
    if quantization and prequantized:
        for sib in sibling_checkpoints(ref):
            out.append(
                model_option(
                    cap, sib, f"{ref} is quantized in a format this GPU cannot run; serve {sib} instead"
                )
            )
        if need:
            cc = need
            gpu = larger_gpu(cap.gpu, min_cc=cc)
            if gpu:
                out.append(
                    gpu_option(cap, gpu, f"the checkpoint needs compute capability {cc:g}: {gpu} has it")
                )
    elif quantization and cap.flags and cap.flags.quantization:
        # Drop the online quantization and serve the checkpoint in 16 bits; a GPU without bf16
        # (cc < 8.0, e.g. a T4) needs --dtype half for that.
        change: dict[str, Any] = {"--quantization": None}
        why = f"--quantization {cap.flags.quantization} is not supported on this GPU: drop it"
        cc_now = gpu_cc(cap.gpu)
        if cc_now is not None and cc_now < 8.0 and cap.flags.dtype in (None, "auto", "bfloat16"):
            change["--dtype"] = "half"
            why += " and serve 16-bit weights as float16 (--dtype half: this GPU has no bfloat16)"
        out.append(flags_option(cap, change, why))
    gpu_options: list[RemediationPlan] = []
    if not prequantized:  # the same checkpoint and flags on a GPU that supports them
        min_cc = need
        if min_cc is None and no_bf16:
            min_cc = 8.0
        cc_now = gpu_cc(cap.gpu)
        if min_cc is not None and (cc_now is None or cc_now < min_cc):
            gpu = larger_gpu(cap.gpu, min_cc=min_cc)
            if gpu:
                gpu_options.append(
                    gpu_option(cap, gpu, f"this needs compute capability {min_cc:g}: {gpu} has it")
                )
    if fact(diag, "kv_cache_dtype") and cap.flags and cap.flags.kv_cache_dtype != "auto":
        out.append(
            flags_option(cap, {"--kv-cache-dtype": "auto"}, "this KV-cache dtype is not supported here")
        )
    out += planner_options(cap, {"set_vllm_args", "set_model"})
    for sib in sibling_checkpoints(ref) if not prequantized else []:
        if not any(s.kind is K.SET_MODEL and s.change.get("model") == sib for o in out for s in o.steps):
            out.append(model_option(cap, sib, "a checkpoint of the same model this GPU can run"))
    # Ranked last: keeping the GPU (flags, then a checkpoint this GPU runs) is the smaller change;
    # preflight takes the first option the planner says fits and the GPU supports.
    out = [*gpu_options, *out] if refused else [*out, *gpu_options]
    env = fact(diag, "asked_env")
    if env and not out:  # an environment variable, not a flag: the service's env is a person's change here
        out.append(
            escalate(
                f"The engine asks for {env['name']}={env['value']} in its environment: set it on the service "
                "(Cloud Run: the container's environment variables) and deploy a new revision.",
                f"the engine refused this configuration and names {env['name']} to set",
            )
        )
    out = distinct_plans(out)
    if not out:
        out.append(
            escalate(
                "The model architecture or kernel is not supported by this vLLM image: use a vLLM image that "
                "supports it, or a supported checkpoint.",
                "the configuration is not supported here",
            )
        )
    return out
