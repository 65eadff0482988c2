"""``gemma-sre sandbox``: a local stand-in for a GCP project, in the foreground (until Ctrl-C), or with
``--env`` in the background, as ``ssh-agent`` does: ``eval "$(gemma-sre sandbox --env)"`` starts it,
prints the ``export`` lines that point gemma-sre at it (and its pid, to stop it) and returns."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer

from agent.params import bounded, time_scale_option, zero_latency_option


def register(app: typer.Typer) -> None:
    @app.command()
    def sandbox(
        port: int = typer.Option(
            8181,
            "--port",
            parser=bounded(int, 0, 65_535),
            help="Loopback port to serve on (0: any free port).",
        ),
        host: str = typer.Option("127.0.0.1", "--host", help="Interface to bind (keep it on loopback)."),
        scenario: str | None = typer.Option(
            None, "--scenario", help="Start in a named state (see --list-scenarios)."
        ),
        incident: Path | None = typer.Option(
            None, "--incident", help="An incident YAML file: its service is deployed and its logs preloaded."
        ),
        time_scale: float = time_scale_option(60.0, "--time-scale"),
        zero_latency: bool = zero_latency_option("--zero-latency"),
        project: str | None = typer.Option(None, "--project", help="Project id scenarios deploy into."),
        location: str | None = typer.Option(None, "--location", help="Location scenarios deploy into."),
        service: list[str] = typer.Option(
            None,
            "--service",
            help="NAME=SCENARIO: one more service, NAME, deployed as the scenario's service is "
            "(repeatable: a sandbox of several services; e.g. --service chat-a=healthy).",
        ),
        list_scenarios: bool = typer.Option(False, "--list-scenarios", help="List scenario names and exit."),
        env: bool = typer.Option(
            False,
            "--env",
            help='Start it in the background and print only export lines: eval "$(gemma-sre sandbox --env)".',
        ),
    ) -> None:
        """Run a local stand-in for a GCP project running vLLM on Cloud Run (until Ctrl-C, or with --env
        in the background)."""
        import time

        from mcp_tools.errors import UserError
        from sandbox.scenarios import SCENARIOS

        if list_scenarios:
            for name in SCENARIOS:
                typer.echo(name)
            return
        if scenario is not None and incident is not None:
            raise UserError("--scenario and --incident: give one, not both")
        if scenario is not None and scenario not in SCENARIOS:
            raise UserError(f"--scenario {scenario!r}: unknown (one of {', '.join(SCENARIOS)})")
        extra = [_named_service(text) for text in service or []]
        if len({name for name, _ in extra}) < len(extra):
            raise UserError("--service: a name is given twice")
        kwargs: dict[str, Any] = dict(
            scenario=scenario,
            incident=incident,
            port=port,
            host=host,
            time_scale=time_scale,
            zero_latency=zero_latency,
            project=project,
            location=location,
            services=extra,
        )
        if env:
            _serve_in_background(kwargs)
            return
        sb = start(kwargs)
        try:
            typer.echo(
                f"gemma-sre sandbox listening on {sb.url}  (scenario: {sb.scenario_name or 'none'}, "
                f"time-scale {time_scale:g})"
            )
            for name, info in sb.state()["services"].items():
                serving = ", ".join(f"{r} {p}%" for r, p in info["serving"]) or "nothing (no ready revision)"
                typer.echo(f"  service {name.rsplit('/', 1)[-1]}, serving: {serving}")
                typer.echo(f"    {info['uri']}")
            typer.echo("Export these to point gemma-sre (and the official clients) at it:")
            for k, v in user_env(sb).items():
                typer.echo(f"  export {k}={_quote(v)}")
            typer.echo("Journal: GET /_sandbox/journal   Faults: POST /_sandbox/faults   Ctrl-C to stop.")
            sys.stdout.flush()
            while True:
                time.sleep(1.0)
        except KeyboardInterrupt:
            typer.echo("stopping")
        finally:
            sb.stop()


def _quote(value: str) -> str:
    import shlex

    return shlex.quote(value)


def _named_service(text: str) -> tuple[str, str]:
    """``--service NAME=SCENARIO`` -> (NAME, SCENARIO), both checked."""
    from mcp_tools.errors import UserError
    from mcp_tools.names import validate_service_name
    from sandbox.scenarios import SCENARIOS

    name, sep, scenario = text.partition("=")
    if not sep or not name or not scenario:
        raise UserError(f"--service {text!r}: expected NAME=SCENARIO, e.g. chat-a=healthy")
    if scenario not in SCENARIOS:
        raise UserError(f"--service {text!r}: unknown scenario {scenario!r} (see --list-scenarios)")
    try:
        validate_service_name(name)
    except UserError as e:
        raise UserError(f"--service {text!r}: {e}") from None
    return name, scenario


def start(kwargs: dict[str, Any]) -> Any:
    """Start the sandbox, then deploy each ``--service NAME=SCENARIO`` (its scenario's deployments, in
    order, under NAME; the sandbox's physics stay the main scenario's) and let them settle."""
    from mcp_tools.errors import UserError
    from sandbox.scenarios import scenario_specs
    from sandbox.server import start_sandbox

    extra = kwargs.pop("services", [])
    try:
        sb = start_sandbox(**kwargs)
    except OSError as e:
        where = f"{kwargs['host']}:{kwargs['port']}"
        raise UserError(f"--port {kwargs['port']}: cannot listen on {where} ({e.strerror or e})") from None
    for name, scenario in extra:
        for spec in scenario_specs(scenario)[0]:
            sb.deploy(spec.model_copy(update={"name": name, "region": None}))
    if extra:
        sb.settle()
    return sb


def user_env(sb: Any) -> dict[str, str]:
    """Every variable a user needs to point gemma-sre at ``sb``: the endpoints, the project, the
    region and the service (its first one)."""
    from sandbox.testing import sandbox_env

    out = dict(sandbox_env(sb))
    names = [key.rsplit("/", 1)[1] for key in sb.state()["services"]]
    if names:
        out["GEMMA_SRE_SERVICE"] = names[0]
    return out


def _serve_in_background(kwargs: dict[str, Any]) -> None:
    """Fork; the child starts the sandbox in a session of its own and serves until SIGTERM, its output
    in ``<state_dir>/sandbox-PID.log``; the parent prints the export lines once it listens, and returns.
    A sandbox that cannot start is one error from the parent (exit 2), nothing is left running."""
    import json
    import os

    from mcp_tools.errors import UserError
    from mcp_tools.settings import get_settings

    state_dir = get_settings().state_dir
    state_dir.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the CLI
        code = 0
        try:
            os.close(r)
            os.setsid()
            code = _child(kwargs, w, state_dir)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        raw = f.read()
    try:
        doc = json.loads(raw or b"{}")
    except ValueError:
        doc = {}
    if "env" not in doc:
        os.waitpid(pid, 0)
        raise UserError(str(doc.get("error") or "the sandbox did not start"))
    lines = [f"export {k}={_quote(v)};" for k, v in doc["env"].items()]
    lines.append(f"export GEMMA_SRE_SANDBOX_PID={doc['pid']};")
    msg = (
        f"gemma-sre sandbox on {doc['url']} (pid {doc['pid']}; stop it: kill {doc['pid']}; log: {doc['log']})"
    )
    lines.append(f"echo {_quote(msg)} >&2;")
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()


def _child(kwargs: dict[str, Any], w: int, state_dir: Path) -> int:
    import json
    import os
    import signal
    import threading

    log_path = state_dir / f"sandbox-{os.getpid()}.log"
    try:
        sb = start(kwargs)
    except Exception as e:
        os.write(w, json.dumps({"error": str(e)}).encode())
        os.close(w)
        return 2
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # the terminal that started it may close
    try:
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        doc = {"env": user_env(sb), "url": sb.url, "pid": os.getpid(), "log": str(log_path)}
        os.write(w, json.dumps(doc).encode())
        os.close(w)
        print(f"gemma-sre sandbox listening on {sb.url} (scenario: {sb.scenario_name or 'none'})", flush=True)
        while not stop.wait(1.0):
            pass
        print("stopping (SIGTERM)", flush=True)
    finally:
        sb.stop()
    return 0
