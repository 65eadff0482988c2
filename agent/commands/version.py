from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def version() -> None:
        """Print the installed gemma-sre version."""
        from importlib.metadata import version as v

        typer.echo(v("gemma-sre"))
