"""``gemma-sre serve``: the alert receiver and the Slack app face, over HTTP (``agent.serve``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import typer


def listening_text(host: str, port: int, slack: Any, fleet: int | None = None) -> str:
    """Where it listens and how to authenticate (never a secret's value)."""
    shown = f"[{host}]" if ":" in host else host
    base = f"http://{shown}:{port}"
    lines = [
        f"gemma-sre serve listening on {base}",
        f"  alerts: POST {base}/alerts/cloud-monitoring, POST {base}/alerts/alertmanager",
        f"  status: GET {base}/investigations",
        "authentication: 'Authorization: Bearer <token>' (or HTTP Basic with the token as the password), "
        "the token being GEMMA_SRE_SERVE_TOKEN as set in this server's environment",
    ]
    if fleet is not None:
        lines.append(
            f"  fleet: alerts for the {fleet} service(s) of the fleet file, each under its watchers' lease"
        )
    if slack is not None:
        lines.append(
            f"  Slack interactivity: POST {base}/slack/interactions (verified by the Slack signature: "
            "GEMMA_SRE_SLACK_SIGNING_SECRET)"
        )
        if slack.client is None:
            lines.append(
                "  Slack messages: off (no GEMMA_SRE_SLACK_BOT_TOKEN / _CHANNEL): sign a callback with "
                "python -m agent.serve.sign_callback"
            )
    else:
        lines.append("  Slack: off (set GEMMA_SRE_SLACK_SIGNING_SECRET, and _BOT_TOKEN and _CHANNEL to post)")
    return "\n".join(lines)


def make_serve(
    services: list[str] | None = None, *, fleet: Any = None, leases: Any = None
) -> tuple[Any, str]:
    """The ``Serve`` object and the token, from the environment (UserError: a bad setting)."""
    from agent.serve.app import Serve
    from agent.serve.settings import serve_settings
    from agent.serve.slack_face import SlackFace
    from graph.config import Configuration

    st = serve_settings()
    assert st.serve_token is not None
    slack = None
    if st.slack_signing_secret is not None:
        slack = SlackFace(
            bot_token=st.slack_bot_token.get_secret_value() if st.slack_bot_token else None,
            signing_secret=st.slack_signing_secret.get_secret_value(),
            channel=st.slack_channel,
            base_url=st.slack_api_url,
        )
    srv = Serve(Configuration.from_settings(), services=services, slack=slack, fleet=fleet, leases=leases)
    return srv, st.serve_token.get_secret_value()


def register(app: typer.Typer) -> None:
    import typer

    from agent.params import bounded

    @app.command()
    def serve(
        host: str = typer.Option("127.0.0.1", "--host", help="Bind address."),
        port: int = typer.Option(8780, "--port", parser=bounded(int, 1, 65_535), help="Port."),
        service: list[str] = typer.Option(
            None,
            "--service",
            help="A service to accept alerts for (repeatable; default: any in the project).",
        ),
        fleet: Path | None = typer.Option(
            None,
            "--fleet",
            help="A fleet file (as watch --fleet reads it): alerts for its services, each investigated "
            "with its own settings under the lease its watcher replicas share.",
        ),
    ) -> None:
        """Receive Cloud Monitoring and Alertmanager alert webhooks (each starts or joins an
        investigation of its service) and Slack button presses (approve / reject / choose an option).
        Needs GEMMA_SRE_SERVE_TOKEN; Slack needs GEMMA_SRE_SLACK_SIGNING_SECRET (and _BOT_TOKEN and
        _CHANNEL to post the requests)."""
        import sys
        from contextlib import ExitStack

        import anyio

        from agent.serve.app import build_app
        from mcp_tools.errors import UserError
        from mcp_tools.names import validate_service_name
        from mcp_tools.server.http import serve_asgi

        for s in service or []:
            validate_service_name(s)
        with ExitStack() as stack:
            loaded = leases = None
            if fleet is not None:
                from agent.fleet import load_fleet
                from graph.leases import open_leases
                from mcp_tools.settings import get_settings

                if service:
                    raise UserError("--service is set per service in the fleet file (--fleet)")
                loaded = load_fleet(fleet)
                st = get_settings()
                leases = stack.enter_context(open_leases(st.checkpoint_url, st.state_dir))
            srv, token = make_serve(list(service or []), fleet=loaded, leases=leases)
            stack.callback(srv.close)
            count = len(loaded.services) if loaded is not None else None

            def ready() -> None:
                print(listening_text(host, port, srv.slack, count), file=sys.stderr, flush=True)

            anyio.run(lambda: serve_asgi(build_app(srv, token), host, port, ready, what="gemma-sre serve"))
