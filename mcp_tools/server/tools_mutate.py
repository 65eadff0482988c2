"""The mutating tools, two-step: the first call returns the plan, the spec diff and a confirmation
token bound to that exact change; only a second call with the token applies it. ``suggest`` keeps
them planning-only; ``read-only`` leaves them out (see build_server)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp.server.fastmcp import FastMCP
from mcp.types import CallToolResult
from pydantic import Field

from mcp_tools.cloudrun_limits import MAX_CONCURRENCY, MAX_INSTANCES, MIN_CONCURRENCY
from mcp_tools.errors import NotFoundError, UserError
from mcp_tools.remediation import PlanStep, RemediationKind
from mcp_tools.server.confirm import digest
from mcp_tools.server.core import MUTATING, SharedResult, check_range, result, tool
from mcp_tools.server.state import ServerState
from mcp_tools.service_models import MutationResult, ServiceInfo, ServiceSpec
from mcp_tools.settings import Policy

log = logging.getLogger(__name__)

MUTATING_TOOLS = frozenset({"deploy_vllm", "destroy_vllm", "update_vllm_scaling", "rollback_service"})
DEFAULT_DEPLOY_IMAGE = "vllm/vllm-openai:latest"
DEFAULT_DEADLINE_S = 540.0


class MutationPlan(SharedResult):
    tool: str
    service: str
    # planned: nothing changed yet (a token is offered); applied: the change is live and Ready;
    # incomplete: the change was sent but did not become Ready (see result.message);
    # planning_only: policy 'suggest', nothing will be applied.
    # no_change: the service already is as asked; nothing to apply, no token.
    status: Literal["planned", "applied", "incomplete", "planning_only", "no_change"]
    summary: str
    diff: str = ""
    current: ServiceSpec | None = None
    proposed: ServiceSpec | None = None
    confirmation_token: str | None = None
    expires_in_s: float | None = None
    approval_id: str | None = None
    result: MutationResult | None = None
    notes: list[str] = Field(default_factory=list)


def register(mcp: FastMCP, state: ServerState) -> None:
    s = state

    async def two_step(
        tool: str,
        service: str,
        args: dict[str, Any],
        current_state: str,
        plan: MutationPlan,
        token: str | None,
        apply: Callable[[str], MutationResult],
    ) -> CallToolResult:
        if plan.status == "no_change":
            if token:  # a used or foreign token is reported as such
                s.confirmations.redeem(token, tool, service, args, current_state)
                raise UserError(f"nothing to apply: {plan.summary}")
            return result(plan, _plan_text(plan))
        if s.policy is Policy.SUGGEST:
            if token:
                raise UserError("policy is 'suggest': changes are planned, never applied by this server")
            plan.status = "planning_only"
            plan.notes.append("policy 'suggest': this server plans changes but does not apply them")
            return result(plan, _plan_text(plan))
        if not token:
            plan.status = "planned"
            plan.confirmation_token = s.confirmations.issue(tool, service, args, current_state)
            plan.expires_in_s = s.confirmations.ttl_s
            return result(plan, _plan_text(plan))
        approval = s.confirmations.redeem(token, tool, service, args, current_state)
        log.info("applying %s on %s with approval %s", tool, service, approval)
        res = await asyncio.to_thread(apply, approval)
        plan.status = "applied" if res.ready else "incomplete"
        plan.approval_id = approval
        plan.result = res
        return result(plan, _plan_text(plan))

    async def current(name: str) -> tuple[ServiceInfo | None, str]:
        try:
            info = await s.get_service(name)
        except NotFoundError:
            return None, "absent"
        return info, info.etag or digest(info.model_dump_json())

    @tool(mcp, MUTATING)
    async def update_vllm_scaling(
        min_instances: Annotated[int, Field(ge=0, le=MAX_INSTANCES)],
        max_instances: Annotated[int, Field(ge=1, le=MAX_INSTANCES)],
        service_name: str | None = None,
        concurrency: Annotated[int, Field(ge=MIN_CONCURRENCY, le=MAX_CONCURRENCY)] | None = None,
        confirmation_token: str | None = None,
    ) -> Annotated[CallToolResult, MutationPlan]:
        """Change min / max instances (and optionally per-instance concurrency). First call: the plan, the
        diff and a confirmation token. Second call with confirmation_token: applies it."""
        from mcp_tools.spec_ops import apply_step, spec_diff

        name = s.service_name(service_name)
        change: dict[str, Any] = {"min_instances": min_instances, "max_instances": max_instances}
        if concurrency is not None:
            change["concurrency"] = concurrency
        step = PlanStep(kind=RemediationKind.SET_SCALING, change=change)
        apply_step(ServiceSpec(name=name), step)  # invalid numbers fail here, before any API call
        info, st = await current(name)
        if info is None:
            raise UserError(f"service {name!r} not found")
        new = apply_step(info.spec, step)
        diff = spec_diff(info.spec, new, label=name)
        plan = MutationPlan(
            tool="update_vllm_scaling",
            service=name,
            status="planned",
            summary=f"set scaling of {name}: " + ", ".join(f"{k}={v}" for k, v in change.items()),
            diff=diff,
            current=info.spec,
            proposed=new,
        )
        if not diff:
            plan.status = "no_change"
            plan.notes.append("no change: the service already has these settings")
        return await two_step(
            "update_vllm_scaling",
            name,
            change,
            st,
            plan,
            confirmation_token,
            lambda approval: s.cloudrun.update_service(
                name, new, approval_id=approval, deadline_s=DEFAULT_DEADLINE_S
            ),
        )

    @tool(mcp, MUTATING)
    async def rollback_service(
        service_name: str | None = None,
        revision: str | None = None,
        confirmation_token: str | None = None,
    ) -> Annotated[CallToolResult, MutationPlan]:
        """Route 100% of traffic to an earlier Ready revision (default: the newest Ready revision that is
        not serving now). First call: the plan; second call with confirmation_token: applies it."""
        from mcp_tools.spec_ops import spec_diff

        name = s.service_name(service_name)
        info, st = await current(name)
        if info is None:
            raise UserError(f"service {name!r} not found")
        revs = await asyncio.to_thread(s.cloudrun.list_revisions, name, limit=50)
        serving = info.serving_revision
        if revision:
            target = next((r for r in revs if r.name == revision), None)
            if target is None:
                raise UserError(
                    f"revision {revision!r} is not a revision of {name!r} (known: "
                    f"{', '.join(r.name for r in revs[:10]) or 'none'})"
                )
            if not target.ready:
                raise UserError(f"revision {revision!r} is not Ready; choose a Ready revision")
        else:
            target = next((r for r in revs if r.ready and r.name != serving), None)
            if target is None:
                raise UserError(f"{name!r} has no other Ready revision to roll back to")
        now_spec = next((r.spec for r in revs if r.name == serving), info.spec)
        plan = MutationPlan(
            tool="rollback_service",
            service=name,
            status="planned",
            summary=f"route 100% of {name}'s traffic from {serving or '-'} to {target.name}",
            diff=spec_diff(now_spec, target.spec, label=f"{name} serving revision"),
            current=now_spec,
            proposed=target.spec,
        )
        if target.name == serving and [t.percent for t in info.traffic] == [100]:
            plan.status = "no_change"
            plan.notes.append(f"{target.name} already serves all the traffic")
        return await two_step(
            "rollback_service",
            name,
            {"revision": target.name},
            st,
            plan,
            confirmation_token,
            lambda approval: s.cloudrun.rollback(name, target.name, approval_id=approval),
        )

    @tool(mcp, MUTATING)
    async def destroy_vllm(
        service_name: str | None = None, confirmation_token: str | None = None
    ) -> Annotated[CallToolResult, MutationPlan]:
        """Delete the Cloud Run service (all revisions and its URL). First call: what would be deleted and a
        confirmation token; second call with confirmation_token: deletes it."""
        from mcp_tools.redact import redact_spec
        from mcp_tools.spec_ops import render

        name = s.service_name(service_name)
        info, st = await current(name)
        if info is None:
            raise UserError(f"service {name!r} not found")
        diff = "".join(f"-{line}\n" for line in render(redact_spec(info.spec)).splitlines())
        plan = MutationPlan(
            tool="destroy_vllm",
            service=name,
            status="planned",
            summary=f"DELETE service {name} ({info.uri or 'no URL'}); this cannot be undone",
            diff=diff,
            current=info.spec,
        )
        return await two_step(
            "destroy_vllm",
            name,
            {},
            st,
            plan,
            confirmation_token,
            lambda approval: s.cloudrun.delete_service(name, approval_id=approval),
        )

    @tool(mcp, MUTATING)
    async def deploy_vllm(
        service_name: str | None = None,
        model_path: str = "",
        bucket_name: str | None = None,
        image: str = DEFAULT_DEPLOY_IMAGE,
        gpu_type: str = "nvidia-l4",
        cpu: int = 8,
        memory: str = "32Gi",
        max_model_len: int | None = None,
        gpu_memory_utilization: float = 0.9,
        extra_vllm_args: list[str] | None = None,
        min_instances: int = 0,
        max_instances: int = 1,
        concurrency: int = 4,
        confirmation_token: str | None = None,
    ) -> Annotated[CallToolResult, MutationPlan]:
        """Deploy vLLM on Cloud Run with a GPU (create the service, or a new revision of an existing one).
        model_path: a folder in bucket_name (mounted read-only at /mnt/models) or a Hugging Face repo id.
        First call: the spec, the diff, the capacity planner's fit and a confirmation token; second call
        with confirmation_token: deploys it."""
        from mcp_tools.spec_ops import apply_step, set_flag, spec_diff

        name = s.service_name(service_name)
        if not model_path or not model_path.strip():
            raise UserError("model_path is required (a folder in the bucket or a Hugging Face repo id)")
        check_range("gpu_memory_utilization", gpu_memory_utilization, 0.1, 0.99)
        scaling = {"min_instances": min_instances, "max_instances": max_instances, "concurrency": concurrency}
        apply_step(ServiceSpec(name=name), PlanStep(kind=RemediationKind.SET_SCALING, change=scaling))
        from_bucket = bool(bucket_name)
        if from_bucket:
            model_ref = f"/mnt/models/{model_path.strip('/')}"
        elif "/" in model_path and not model_path.startswith("/"):
            model_ref = model_path  # a Hugging Face repo id
        else:
            raise UserError("model_path without bucket_name must be a Hugging Face repo id (owner/name)")
        args = [f"--model={model_ref}", "--port=8000", "--host=0.0.0.0"]
        args = set_flag(args, "--gpu-memory-utilization", gpu_memory_utilization)
        if max_model_len is not None:
            if max_model_len < 256:
                raise UserError(f"max_model_len must be at least 256, not {max_model_len}")
            args = set_flag(args, "--max-model-len", max_model_len)
        args += list(extra_vllm_args or [])
        from mcp_tools.service_models import StartupProbe

        new = ServiceSpec(
            name=name,
            region=s.settings.location,
            gpu_type=gpu_type,
            gpu_count=1,
            cpu=cpu,
            memory=memory,
            image=image,
            args=args,
            env={"HF_HUB_OFFLINE": "1"} if from_bucket else {},
            min_instances=min_instances,
            max_instances=max_instances,
            concurrency=concurrency,
            startup_probe=StartupProbe(
                initial_delay_seconds=0,
                period_seconds=10,
                timeout_seconds=5,
                failure_threshold=180,
                http_path="/health",
            ),
            gpu_zonal_redundancy=False,
        )
        info, st = await current(name)
        old = info.spec if info else ServiceSpec(name=name)
        plan = MutationPlan(
            tool="deploy_vllm",
            service=name,
            status="planned",
            summary=("update" if info else "create") + f" {name}: vLLM serving {model_ref} on {gpu_type}",
            diff=spec_diff(old, new, label=name),
            current=info.spec if info else None,
            proposed=new,
        )
        if info is not None and not plan.diff:
            plan.status = "no_change"
            plan.notes.append("no change: the service already runs this configuration")
        try:
            from mcp_tools.capacity import parse_vllm_args
            from mcp_tools.capacity import plan_capacity as _plan

            cap = await asyncio.to_thread(
                _plan,
                model_path.strip("/").split("/")[-1] if from_bucket else model_path,
                gpu=gpu_type,
                flags=parse_vllm_args(args),
            )
            plan.notes.append(f"capacity planner: {cap.verdict}")
        except UserError as e:
            plan.notes.append(f"capacity planner: no prediction ({e})")
        if from_bucket and info is None:
            plan.notes.append(
                f"weights from gs://{bucket_name}/{model_path.strip('/')} mounted at /mnt/models"
            )
        elif from_bucket:
            plan.notes.append(
                "the service exists: its volumes are kept as they are (bucket_name only applies when "
                f"creating); the model must be under the mount that already holds gs://{bucket_name}"
            )
        args_key = {**new.model_dump(mode="json"), "bucket": bucket_name}

        def apply(approval: str) -> MutationResult:
            if info is not None:
                return s.cloudrun.update_service(
                    name, new, approval_id=approval, deadline_s=DEFAULT_DEADLINE_S
                )
            return s.cloudrun.create_service(
                new, approval_id=approval, deadline_s=DEFAULT_DEADLINE_S, gcs_bucket=bucket_name or None
            )

        return await two_step("deploy_vllm", name, args_key, st, plan, confirmation_token, apply)


def _plan_text(plan: MutationPlan) -> str:
    lines = [f"{plan.tool} on {plan.service}: {plan.status}", plan.summary]
    if plan.diff:
        lines.append(plan.diff.rstrip("\n"))
    lines += plan.notes
    if plan.confirmation_token:
        lines.append(
            f"To apply, call {plan.tool} again with the same arguments and "
            f"confirmation_token={plan.confirmation_token!r} (valid {plan.expires_in_s:.0f} s, single use)."
        )
    if plan.result is not None:
        r = plan.result
        lines.append(
            f"result: {r.operation} {'succeeded' if r.ready else 'did not finish'}"
            + (f"; revision {r.revision}" if r.revision else "")
            + f"; {r.message}; approval {r.approval_id}"
        )
    return "\n".join(lines)
