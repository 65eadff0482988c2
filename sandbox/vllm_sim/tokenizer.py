"""Deterministic, cheap tokenization (about one token per word or per 4 characters), a Gemma-style
chat template and synthetic replies: the same functions drive ``/tokenize``, ``usage`` and the
max-model-len check."""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable
from typing import Any

from sandbox.vllm_sim.config import VOCAB_SIZE

_TOKEN_RE = re.compile(r"\s*\S{1,4}")
BOS = "<bos>"


def tokenize(text: str) -> list[str]:
    """Split ``text`` into token strings: each is optional leading whitespace plus 1-4 non-space chars.

    Trailing whitespace is not a token. Concatenating the pieces gives back ``text`` (minus trailing
    whitespace), so a reply built from pieces re-tokenizes to the same count.
    """
    return _TOKEN_RE.findall(text)


def count_tokens(text: str) -> int:
    return len(_TOKEN_RE.findall(text))


def token_ids(pieces: Iterable[str]) -> list[int]:
    return [zlib.crc32(p.encode()) % VOCAB_SIZE for p in pieces]


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return str(content)


def apply_chat_template(messages: list[dict[str, Any]], add_generation_prompt: bool = True) -> str:
    """A Gemma-style chat template (system folds into user turns as Gemma's template does)."""
    parts = [BOS]
    for m in messages:
        role = str(m.get("role", "user"))
        role = "model" if role == "assistant" else "user" if role in ("system", "developer") else role
        parts.append(f"<start_of_turn>{role}\n{_content_text(m.get('content'))}<end_of_turn>\n")
    if add_generation_prompt:
        parts.append("<start_of_turn>model\n")
    return "".join(parts)


# Every word is at most 4 characters, so " word" is exactly one token.
_REPLY_WORDS: tuple[str, ...] = (
    "the", "sim", "says", "this", "is", "a", "test", "of", "load", "path", "and", "each", "word", "one",
    "so", "you", "can", "them", "with", "ease", "kv", "hit", "rate", "ok", "fine", "all", "good", "more",
    "data", "here", "we", "go", "next", "step", "wait",
)  # fmt: skip


def synthetic_reply(seed: int, n_tokens: int) -> list[str]:
    """``n_tokens`` deterministic token pieces (each one token) for a request with this seed."""
    words = _REPLY_WORDS
    k = len(words)
    x = seed & 0xFFFFFFFF
    out = []
    for _ in range(n_tokens):
        x = (1103515245 * x + 12345) & 0x7FFFFFFF
        out.append(" " + words[x % k])
    return out
