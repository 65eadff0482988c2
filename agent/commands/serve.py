"""``gemma-sre serve``: the alert receiver and the Slack app face, over HTTP (``agent.serve``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import typer


def listening_text(host: str, port: int, slack: bool) -> str:
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
    if slack:
        lines.append(
            f"  Slack interactivity: POST {base}/slack/interactions (verified by the Slack signature: "
            "GEMMA_SRE_SLACK_SIGNING_SECRET)"
        )
    else:
        lines.append("  Slack: off (set GEMMA_SRE_SLACK_SIGNING_SECRET, _BOT_TOKEN and _CHANNEL)")
    return "\n".join(lines)


def make_serve(services: list[str] | None = None) -> tuple[Any, str]:
    """The ``Serve`` object and the token, from the environment (UserError: a bad setting)."""
    from agent.serve.app import Serve
    from agent.serve.settings import serve_settings
    from agent.serve.slack_face import SlackFace
    from graph.config import Configuration

    st = serve_settings()
    assert st.serve_token is not None
    slack = None
    if st.slack_configured:
        assert st.slack_bot_token and st.slack_signing_secret and st.slack_channel
        slack = SlackFace(
            bot_token=st.slack_bot_token.get_secret_value(),
            signing_secret=st.slack_signing_secret.get_secret_value(),
            channel=st.slack_channel,
            base_url=st.slack_api_url,
        )
    return Serve(
        Configuration.from_settings(), services=services, slack=slack
    ), st.serve_token.get_secret_value()


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
    ) -> None:
        """Receive Cloud Monitoring and Alertmanager alert webhooks (each starts or joins an
        investigation of its service) and Slack button presses (approve / reject / choose an option).
        Needs GEMMA_SRE_SERVE_TOKEN; Slack needs GEMMA_SRE_SLACK_SIGNING_SECRET, _BOT_TOKEN, _CHANNEL."""
        import sys

        import anyio

        from agent.serve.app import build_app
        from mcp_tools.names import validate_service_name
        from mcp_tools.server.http import serve_asgi

        for s in service or []:
            validate_service_name(s)
        srv, token = make_serve(list(service or []))

        def ready() -> None:
            print(listening_text(host, port, srv.slack is not None), file=sys.stderr, flush=True)

        try:
            anyio.run(lambda: serve_asgi(build_app(srv, token), host, port, ready, what="gemma-sre serve"))
        finally:
            srv.close()
