"""The REPL's commands as a plain class: ``ReplCommands.dispatch(line) -> Reply``.

Nothing here reads a terminal or prints. Each command returns rich renderables in a ``Reply``; a
reply may carry an approval request (``pending``) that the prompt loop shows and answers with y/n
through ``decide``. Every slash command works without a model: the figures come from the tools that
compute them (the capacity planner, vLLM's ``/metrics``, benchmark runs, Cloud Run and Cloud
Logging), and each table says which.
"""

from __future__ import annotations

import asyncio
import logging
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import RenderableType
from rich.markdown import Markdown
from rich.table import Table
from rich.text import Text

from agent.display import OUTCOME_STYLE, current_user, render_request
from agent.readouts import note as _note
from graph.state import ApprovalRequest
from mcp_tools.errors import ExternalError, UserError
from mcp_tools.settings import Policy

log = logging.getLogger(__name__)

Emit = Callable[[str], None]


@dataclass
class Reply:
    """What a command produced: renderables to print, and maybe an approval request to ask about."""

    renderables: list[RenderableType] = field(default_factory=list)
    pending: ApprovalRequest | None = None  # the graph's approval request (plan, diff, prediction)
    thread_id: str | None = None
    exit: bool = False
    error: bool = False

    def text(self) -> str:
        """The renderables as plain text (tests, logs)."""
        from rich.console import Console

        c = Console(width=140, record=True, file=open("/dev/null", "w"), color_system=None)  # noqa: SIM115
        for r in self.renderables:
            c.print(r)
        c.file.close()
        return c.export_text()


def _err(msg: str) -> Reply:
    return Reply([Text(f"error: {msg}", style="red")], error=True)


HELP: dict[str, str] = {
    "/status": "the service: URL, revisions, conditions, /health",
    "/logs": "/logs [filter]  the newest 50 log records of the last 24 hours (containing filter)",
    "/metrics": "series over time (Cloud Monitoring), then vLLM /metrics now, the service's figures",
    "/threads": "the threads waiting for a decision: ids, plan, age",
    "/incidents": "past incidents: ids, category, outcome, report",
    "/diagnose": "observe and diagnose (read-only): root cause with cited evidence",
    "/plan": "run the loop to a remediation plan: diff, prediction, then approve y/n",
    "/approve": "/approve [thread] [--option N]  approve the waiting plan, or ranked option N "
    "(apply, verify, roll back if needed)",
    "/reject": "/reject [reason]  reject the waiting plan",
    "/bench": "/bench [concurrency,...]  a short load test of the endpoint (TTFT, ITL, throughput)",
    "/capacity": "/capacity [model] [gpu] [--flag=value ...]  the capacity planner (default: the service)",
    "/report": "/report [thread]  the incident report of the last (or named) thread",
    "/service": "/service NAME  switch to another service",
    "/help": "this list",
    "/quit": "leave (Ctrl-D does too)",
}
COMMAND_NAMES: list[str] = list(HELP)


class ReplCommands:
    """The REPL's state (service, last thread, last benchmark) and its commands."""

    def __init__(
        self,
        cfg: Any,
        *,
        approver: str | None = None,
        services: list[str] | None = None,
    ) -> None:
        self.cfg = cfg  # graph.config.Configuration
        self.approver = current_user()  # who decides: the OS user running the REPL
        self.approver_note = approver.strip() if approver and approver.strip() else None  # typed
        self.last_thread: str | None = None
        self.pending_thread: str | None = None
        self.last_bench: dict[str, Any] | None = None  # figures of the last /bench, for questions
        self.last_capacity: dict[str, Any] | None = None
        self._services = services
        self._world: Any = None
        #: where /bench reports its progress (``mcp_tools.bench.engine.ProgressEvent``); the prompt
        #: loop sets it while /bench runs
        self.bench_progress: Callable[[Any], None] | None = None

    # -- plumbing --

    @property
    def service(self) -> str:
        return str(self.cfg.service or "")

    @property
    def world(self) -> Any:
        if self._world is None:
            from graph.world import World

            self._world = World(self.cfg)
        return self._world

    def service_names(self) -> list[str]:
        """Service names for completion (listed once; empty when Cloud Run cannot be read)."""
        if self._services is None:
            try:
                self._services = sorted(s.name for s in self.world.cloudrun.list_services())
            except Exception as e:  # completion must never fail the REPL
                log.info("cannot list services for completion: %s", e.__class__.__name__)
                self._services = []
        return list(self._services)

    def _need_service(self) -> str:
        if not self.service:
            raise UserError("no service: start with --service NAME, or type /service NAME")
        return self.service

    def _endpoint_url(self) -> tuple[str, str]:
        """(base URL, where it came from): the service's URL, else VLLM_BASE_URL."""
        from agent.readouts import endpoint_url

        return endpoint_url(self.world, self.service, self.cfg.vllm_base_url)

    # -- dispatch --

    def dispatch(self, line: str) -> Reply:
        """Run one slash command. Bad input and unreachable services are one-line errors."""
        line = line.strip()
        if not line:
            return Reply()
        if not line.startswith("/"):
            return _err("not a command; free-form questions go to the model (see /help)")
        try:
            parts = shlex.split(line)
        except ValueError as e:
            return _err(f"cannot parse {line!r}: {e}")
        name, args = parts[0].lower(), parts[1:]
        handler = getattr(self, "cmd_" + name[1:], None) if name in HELP else None
        if handler is None:
            close = [c for c in COMMAND_NAMES if c.startswith(name)]
            hint = f" (did you mean {', '.join(close)}?)" if close else "; /help lists the commands"
            return _err(f"unknown command {name}{hint}")
        try:
            return handler(args)  # type: ignore[no-any-return]
        except (UserError, ExternalError) as e:
            return _err(str(e))
        except KeyboardInterrupt:
            raise
        except Exception as e:
            log.debug("command %s failed", name, exc_info=True)
            return _err(f"{name}: {e.__class__.__name__}: {str(e)[:300]}")

    # -- commands --

    def cmd_help(self, args: list[str]) -> Reply:
        t = Table(show_header=False, box=None, pad_edge=False)
        for name, text in HELP.items():
            t.add_row(Text(name, style="bold"), Text(text))  # Text: "[filter]" is not markup
        t.add_row("", "")
        t.add_row(
            Text("anything else", style="bold"), "a question for the model (read-only tools; needs a model)"
        )
        return Reply([t])

    def cmd_quit(self, args: list[str]) -> Reply:
        return Reply(exit=True)

    def cmd_service(self, args: list[str]) -> Reply:
        if len(args) != 1:
            return _err("usage: /service NAME")
        from mcp_tools.names import validate_service_name

        name = validate_service_name(args[0])
        self.cfg = self.cfg.model_copy(update={"service": name})
        self._world = None
        return Reply([_note(f"service is now {name}", "green")])

    def cmd_status(self, args: list[str]) -> Reply:
        from agent.readouts import render_status, service_status

        return Reply(render_status(service_status(self.world, self._need_service())))

    def cmd_logs(self, args: list[str]) -> Reply:
        from agent.readouts import render_logs, service_logs

        name = self._need_service()
        return Reply(render_logs(service_logs(self.world, name, text_filter=" ".join(args) or None)))

    def cmd_metrics(self, args: list[str]) -> Reply:
        from agent.readouts import render_metrics, service_metrics

        out: list[Any] = self._series_view()
        try:
            now = service_metrics(self.world, self.service, self.cfg.vllm_base_url)
        except Exception as e:
            if not out:
                raise
            from mcp_tools.errors import short_error

            return Reply([*out, _note(f"/metrics not read: {short_error(e)}", "yellow")])
        return Reply([*out, *render_metrics(now)])

    def _series_view(self) -> list[Any]:
        """The service's series over the loop's window (Cloud Monitoring), with sparklines; a note
        when they cannot be read; nothing without a service or a Monitoring endpoint."""
        if not self.service or not self.cfg.monitoring_wanted:
            return []
        from datetime import UTC, datetime

        from agent.metrics_view import render
        from mcp_tools.errors import short_error

        try:
            got = self.world.read_series(
                self.service,
                window_s=self.cfg.series_window_s,
                period_s=self.cfg.series_period_s,
                end=datetime.now(UTC),
            )
        except Exception as e:
            return [_note(f"Cloud Monitoring not read: {short_error(e)}", "yellow")]
        return [Text(render(got) + "\n")]

    def cmd_threads(self, args: list[str]) -> Reply:
        from agent.readouts import pending_threads, render_threads

        return Reply(render_threads(pending_threads(self.cfg.state_path)))

    def cmd_incidents(self, args: list[str]) -> Reply:
        from agent.readouts import past_incidents, render_incidents

        return Reply(render_incidents(past_incidents(self.cfg.state_path)))

    # -- the loop (graph) --

    def _cfg(self, **update: Any) -> Any:
        return self.cfg.model_copy(update=update)

    def cmd_diagnose(self, args: list[str]) -> Reply:
        from graph.runner import run_cycle

        self._need_service()
        res = run_cycle(self._cfg(policy=Policy.READ_ONLY))
        self.last_thread = res.thread_id
        return Reply(
            self._diagnosis(res.values) + [_note(f"thread {res.thread_id}")], thread_id=res.thread_id
        )

    def _diagnosis(self, values: dict[str, Any]) -> list[RenderableType]:
        d = values.get("diagnosis") or {}
        summary = values.get("observation_summary") or {}
        head = Text()
        head.append(f"{d.get('category', 'unknown')}", style="bold magenta")
        head.append(f" (confidence {float(d.get('confidence') or 0):.2f}): {d.get('summary', '')}")
        out: list[RenderableType] = [head]
        for ev in (d.get("evidence") or [])[:6]:
            out.append(Text(f"  line {ev.get('line')}: {ev.get('text')}", style="dim"))
        for u in summary.get("unread") or []:
            out.append(_note(f"could not read {u}", "yellow"))
        if d.get("model_used"):
            out.append(_note(f"model: {d['model_used']}"))
        return out

    def cmd_plan(self, args: list[str]) -> Reply:
        from graph.runner import run_cycle

        self._need_service()
        if self.pending_thread:
            return _err(f"thread {self.pending_thread} is waiting for a decision: /approve or /reject first")
        res = run_cycle(self.cfg)
        self.last_thread = res.thread_id
        out = self._diagnosis(res.values)
        if res.status == "awaiting_approval" and res.pending is not None:
            self.pending_thread = res.thread_id
            return Reply(out, pending=res.pending, thread_id=res.thread_id)
        shown = ApprovalRequest.of_state(res.values, thread_id=res.thread_id, service=self.cfg.service)
        if shown.plan.steps:
            out.append(render_request(shown))
        out.append(Text(f"{res.status}: {res.summary}", style="bold"))
        return Reply(out, thread_id=res.thread_id)

    def decide(
        self,
        decision: str,
        *,
        thread: str | None = None,
        reason: str | None = None,
        option: int | None = None,
    ) -> Reply:
        """Answer the waiting (or named) thread's approval request and run it to the end (``option``:
        approve that ranked option instead of the one offered)."""
        from graph.runner import resume_cycle

        tid = thread or self.pending_thread
        if not tid:
            return _err("nothing is waiting for a decision (run /plan first)")
        res = resume_cycle(
            tid,
            decision=decision,
            approver=self.approver,
            note=self.approver_note,
            reason=reason,
            live=self.cfg,
            option=option,
        )
        if tid == self.pending_thread:
            self.pending_thread = None
        self.last_thread = tid
        style = OUTCOME_STYLE.get(res.status, "bold")
        out: list[RenderableType] = []
        timeline = res.values.get("timeline") or []
        for e in timeline:
            if e.get("node") in ("approve", "apply", "verify", "rollback"):
                out.append(Text(f"{e.get('node'):>9} {e.get('message', '')}"))
        out.append(Text(f"{res.status}: {res.summary}", style=style))
        if res.report.get("markdown"):
            out.append(_note(f"report: {res.report['markdown']}  (/report)"))
        return Reply(out, thread_id=tid)

    def cmd_approve(self, args: list[str]) -> Reply:
        option: int | None = None
        rest = list(args)
        if "--option" in rest:
            i = rest.index("--option")
            value = rest[i + 1] if i + 1 < len(rest) else ""
            if not value.isdigit() or int(value) < 1:
                return _err(f"/approve --option N: N is an option's number (1, 2, ...), not {value!r}")
            option = int(value)
            del rest[i : i + 2]
        try:
            return self.decide("approve", thread=rest[0] if rest else None, option=option)
        except (UserError, ExternalError) as e:
            return _err(str(e))

    def cmd_reject(self, args: list[str]) -> Reply:
        return self.decide("reject", reason=" ".join(args) or "rejected in the REPL")

    def cmd_report(self, args: list[str]) -> Reply:
        tid = args[0] if args else self.last_thread
        if not tid:
            return _err("no thread yet: run /diagnose or /plan first, or give a thread id")
        from graph.runner import thread_result

        res = thread_result(tid)
        path = res.report.get("markdown")
        if not path:
            if res.finished:
                return _err(f"thread {tid} wrote no report: it found nothing ({res.status}: {res.summary})")
            return _err(f"thread {tid} has no report yet (it is waiting for a decision or still running)")
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as e:
            return _err(f"cannot read the report {path}: {e.strerror}")
        return Reply([Markdown(text), _note(f"report: {path}")], thread_id=tid)

    # -- tools with figures --

    def cmd_bench(self, args: list[str]) -> Reply:
        from mcp_tools.bench.config import BenchConfig, parse_int_list
        from mcp_tools.bench.engine import run_benchmark

        url, where = self._endpoint_url()
        conc = parse_int_list(args[0], "concurrency") if args else [1, 4]
        config = BenchConfig(
            url=url,
            concurrencies=conc,
            context_lengths=[256],
            output_tokens=64,
            requests_per_point=8,
            seconds_per_point=30.0,
            warmup_requests=1,
            output_dir=Path(self.cfg.state_path) / "bench-runs",
            label=self.service or "endpoint",
            request_timeout_s=60.0,
        )
        res = asyncio.run(run_benchmark(config, progress=self.bench_progress))
        self.last_bench = {
            "url": url,
            "run_dir": res.run_dir,
            "points": [p.model_dump(mode="json") for p in res.points],
            "errors": res.errors,
        }
        md = res.summary_markdown(max_rows=20)
        more = f"; full run: {res.run_dir}" if res.run_dir else ""
        return Reply([Markdown(md), _note(f"source: benchmark of {where} ({url}){more}")])

    def cmd_capacity(self, args: list[str]) -> Reply:
        from mcp_tools.capacity import parse_vllm_args, plan_capacity

        positional = [a for a in args if not a.startswith("--")]
        flag_args = [a for a in args if a.startswith("--")]
        model: str | None = positional[0] if positional else None
        gpu: str | None = positional[1] if len(positional) > 1 else None
        gpu_count = 1
        where = "arguments"
        if model is None:
            if not self.service:
                raise UserError("usage: /capacity MODEL [GPU] [--vllm-flag=value ...] (or pick a service)")
            from mcp_tools.spec_ops import get_model

            spec = self.world.get_service(self.service).spec
            model = get_model(spec.args)
            if not model:
                raise UserError(f"service {self.service}: no --model in its vLLM args; give /capacity MODEL")
            gpu = gpu or spec.gpu_type
            gpu_count = spec.gpu_count or 1
            flag_args = [a for a in spec.args if a.startswith("--")] + flag_args
            where = f"service {self.service}"
        flags = parse_vllm_args([f"--model={model}", *[a for a in flag_args if not a.startswith("--model")]])
        plan = plan_capacity(model, gpu=gpu or "nvidia-l4", gpu_count=gpu_count, flags=flags)
        self.last_capacity = plan.to_spec_json()
        t = Table(title=f"Capacity: {plan.model} on {plan.gpu_count} x {plan.gpu}", show_header=False)
        rows = [
            ("GPU memory", f"{plan.gpu_memory_gib:.1f} GiB"),
            ("weights", f"{plan.weights_gib:.2f} GiB ({plan.weight_format or plan.dtype})"),
            ("activations", f"{plan.activation_gib:.2f} GiB"),
            ("overhead", f"{plan.overhead_gib:.2f} GiB"),
            ("KV cache", f"{plan.kv_cache_gib:.2f} GiB = {plan.kv_cache_tokens} tokens"),
            ("max model len", str(plan.max_model_len)),
            ("max concurrency", f"{plan.max_concurrency:.2f} requests at full length"),
            ("fits", "yes" if plan.fits else f"no (binding: {plan.binding_constraint})"),
        ]
        for k, v in rows:
            t.add_row(k, v)
        out: list[RenderableType] = [t, Text(plan.verdict, style="bold" if plan.fits else "bold red")]
        for w in plan.warnings:
            out.append(_note(f"warning: {w}", "yellow"))
        for s in plan.suggestions[:5]:
            fit = "fits" if s.fits else "does not fit"
            out.append(Text(f"  suggestion ({s.kind}): {s.summary} [{fit}, {s.kv_cache_tokens} KV tokens]"))
        out.append(_note(f"source: capacity planner (mcp_tools.capacity.plan_capacity), from {where}"))
        return Reply(out)
