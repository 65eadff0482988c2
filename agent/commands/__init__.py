"""One module per command; each exposes ``register(app)``. Keep module imports light."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import typer

#: Command modules, in the order ``--help`` lists them.
COMMANDS: list[str] = [
    "demo",
    "run",
    "approve",
    "threads",
    "status",
    "repl",
    "watch",
    "diagnose",
    "plan",
    "metrics",
    "eval",
    "bench",
    "sandbox",
    "mcp",
    "serve",
    "version",
]


def register_all(app: typer.Typer) -> None:
    for name in COMMANDS:
        importlib.import_module(f"agent.commands.{name}").register(app)
