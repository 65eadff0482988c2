"""Prompt templates, kept as files beside this module, and their loader."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources


@lru_cache(maxsize=32)
def load_prompt(name: str) -> str:
    """The text of ``prompts/<name>.md`` (a bad name is a ``FileNotFoundError`` naming it)."""
    if not name or "/" in name or "\\" in name or name.startswith("."):
        raise FileNotFoundError(f"prompt {name!r}: not a prompt name")
    path = resources.files(__name__).joinpath(f"{name}.md")
    if not path.is_file():
        raise FileNotFoundError(f"prompt {name!r}: no file prompts/{name}.md")
    return path.read_text(encoding="utf-8")
