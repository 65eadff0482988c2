"""Unique prompts of an exact token length.

Every prompt starts with a run-unique tag (so no two requests share a cacheable prefix, and vLLM's
prefix cache cannot make prefill look free), followed by random common words. With
``shared_prefix`` the words come first (the same for every request) and the tag goes last.

When the server has ``/tokenize`` (vLLM does), each prompt is measured with the server's own
tokenizer (chat template included for chat requests) and words are added or removed until it has
exactly the asked number of tokens; otherwise lengths are estimated at one token per word.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from pydantic import BaseModel

logger = logging.getLogger(__name__)

# Short common English words: one token each in the usual tokenizers (and in the sandbox's).
WORDS: tuple[str, ...] = (
    "the", "of", "and", "to", "in", "is", "you", "that", "it", "he", "was", "for", "on", "are", "as",
    "with", "his", "they", "at", "be", "this", "have", "from", "or", "one", "had", "by", "word", "but",
    "not", "what", "all", "were", "we", "when", "your", "can", "said", "there", "use", "an", "each",
    "which", "she", "do", "how", "their", "if", "will", "up", "other", "about", "out", "many", "then",
    "them", "these", "so", "some", "her", "would", "make", "like", "him", "into", "time", "has", "look",
    "two", "more", "write", "go", "see", "number", "no", "way", "could", "people", "my", "than", "first",
    "water", "been", "call", "who", "oil", "its", "now", "find", "long", "down", "day", "did", "get",
    "come", "made", "may", "part",
)  # fmt: skip

_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_TAG_SPACE = 26**4


class Prompt(BaseModel):
    text: str
    tokens: int  # measured with /tokenize, or estimated (exact=False)
    exact: bool


class TagSequence:
    """Distinct 4-letter tags: a random affine walk over 26^4, so runs differ and tags never repeat."""

    def __init__(self, rng: random.Random) -> None:
        self.start = rng.randrange(_TAG_SPACE)
        self.step = rng.choice((7919, 104729, 1299709, 15485863))  # primes, coprime with 26^4
        self.i = 0

    def next(self) -> str:
        if self.i >= _TAG_SPACE:
            raise ValueError(f"at most {_TAG_SPACE} unique prompts per run")
        v = (self.start + self.i * self.step) % _TAG_SPACE
        self.i += 1
        return "".join(_LETTERS[(v // 26**k) % 26] for k in range(4))


def _body(words: list[str]) -> str:
    return " ".join(words)


class PromptFactory:
    """Builds prompts for one run; measures them with the server's ``/tokenize`` when it can."""

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        model: str,
        chat: bool,
        shared_prefix: bool,
        exact: bool,
        rng: random.Random,
        headers: Callable[[], Awaitable[dict[str, str]]] | None = None,
    ) -> None:
        self.client = client
        self.model = model
        self.chat = chat
        self.shared_prefix = shared_prefix
        self.exact = exact
        self.rng = rng
        self._headers = headers
        self._tokenize_ok: bool | None = None if exact else False
        self._shared_words: list[str] = []
        self._tags = TagSequence(rng)
        self._overhead: int | None = None

    def _tag(self) -> str:
        return self._tags.next()

    def payload_for(self, text: str) -> dict[str, Any]:
        if self.chat:
            return {"model": self.model, "messages": [{"role": "user", "content": text}]}
        return {"model": self.model, "prompt": text}

    async def count(self, text: str) -> int | None:
        """Tokens of ``text`` as the server counts them for a request (template included); None if unknown."""
        if self._tokenize_ok is False:
            return None
        headers = await self._headers() if self._headers else {}
        try:
            r = await self.client.post("/tokenize", json=self.payload_for(text), headers=headers)
        except httpx.HTTPError as e:
            logger.warning("/tokenize failed (%s); prompt lengths will be estimated", type(e).__name__)
            self._tokenize_ok = False
            return None
        if r.status_code != 200:
            logger.warning("/tokenize answered %d; prompt lengths will be estimated", r.status_code)
            self._tokenize_ok = False
            return None
        self._tokenize_ok = True
        return int(r.json()["count"])

    async def _template_overhead(self) -> int:
        if self._overhead is None:
            counted = await self.count("a")
            self._overhead = max(0, (counted - 1)) if counted is not None else (6 if self.chat else 1)
        return self._overhead

    def _words(self, k: int) -> list[str]:
        if self.shared_prefix:
            while len(self._shared_words) < k:
                self._shared_words.append(self.rng.choice(WORDS))
            return self._shared_words[:k]
        return [self.rng.choice(WORDS) for _ in range(k)]

    def _compose(self, tag: str, words: list[str]) -> str:
        if self.shared_prefix:
            return f"{_body(words)} {tag}" if words else tag
        return f"{tag} {_body(words)}" if words else tag

    async def make(self, target_tokens: int) -> Prompt:
        """One unique prompt of ``target_tokens`` tokens (as close as the tokenizer allows)."""
        overhead = await self._template_overhead()
        tag = self._tag()
        k = max(0, target_tokens - overhead - 1)
        words = self._words(k)
        text = self._compose(tag, words)
        counted = await self.count(text)
        if counted is None:
            return Prompt(text=text, tokens=overhead + 1 + k, exact=False)
        best = (abs(counted - target_tokens), counted, text)
        for _ in range(6):
            diff = target_tokens - counted
            if diff == 0:
                return Prompt(text=text, tokens=counted, exact=True)
            if diff > 0:
                words = words + self._extra(diff, len(words))
            else:
                cut = min(len(words), -diff)
                if cut == 0:
                    break  # the tag and template alone are longer than asked
                words = words[: len(words) - cut]
            text = self._compose(tag, words)
            counted = await self.count(text)
            if counted is None:
                break
            if abs(counted - target_tokens) < best[0]:
                best = (abs(counted - target_tokens), counted, text)
        _, counted_best, text_best = best
        return Prompt(text=text_best, tokens=counted_best, exact=counted_best == target_tokens)

    def _extra(self, k: int, have: int) -> list[str]:
        if self.shared_prefix:
            return self._words(have + k)[have:]
        return [self.rng.choice(WORDS) for _ in range(k)]

    async def make_many(self, target_tokens: int, n: int, parallel: int = 32) -> list[Prompt]:
        sem = asyncio.Semaphore(parallel)

        async def one() -> Prompt:
            async with sem:
                return await self.make(target_tokens)

        if self._overhead is None:
            await self._template_overhead()
        return list(await asyncio.gather(*[one() for _ in range(n)]))
