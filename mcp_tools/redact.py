"""Redaction: credentials out of any text, JSON-like value or command line before it is logged,
prompted, stored or reported.

``redact`` (text), ``redact_data`` (JSON-like values; secret-looking keys and Cloud Run's
``{"name": "HF_TOKEN", "value": ...}`` env pairs), ``redact_args`` (a command line, where a secret
flag's value may be the next item).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from pydantic import BaseModel

# Cheap gate, run on the lower-cased line: only lines that might hold a secret go through every pattern.
_SECRET_HINT = re.compile(
    r"bearer|basic |hf_|aiza|ya\d+\.|private.?key|passw|passphrase|pwd|secret|token(?![s_]|izer)"
    r"|api.?key|access.?key|credential|auth\w*[\"']?\s*[:=]|eyj|akia|asia|://[^/\s:@]*:[^/\s@]+@"
    r"|gh[pousr]_|github_pat_|sk-|xox[abpr]-|^[a-z0-9+/]{40,}={0,2}$",
    re.M,
)

_KEY_NAMES = (
    r"[A-Za-z0-9_.-]*?(?:password|passwd|passphrase|pwd|secret|token|api[_-]?key|apikey|access[_-]?key"
    r"|private[_-]?key(?:[_-]?id)?|credentials?|auth)"
)


def _keep_quotes(value: str) -> str:
    """A quoted value stays quoted, so redacted JSON or YAML still parses."""
    q = value[0] if value[:1] in ("'", '"') else ""
    return f"{q}[REDACTED]{q}"


#: (pattern, replacement) in order. Each replacement keeps enough context to read the line.
_REDACTIONS: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = [
    # PEM private keys (whole block, or a block cut by the log line)
    (
        re.compile(r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----.*?(?:-----END \1PRIVATE KEY-----|$)", re.DOTALL),
        "[REDACTED:private_key]",
    ),
    # A line that is only base64 (a PEM body printed one line per log entry): mixed case and digits,
    # so hex digests and words stay
    (
        re.compile(r"(?m)^(?=[^\n]*[A-Z])(?=[^\n]*[a-z])(?=[^\n]*\d)[A-Za-z0-9+/]{40,}={0,2}$"),
        "[REDACTED:key_material]",
    ),
    # Authorization headers: "Authorization: Bearer x", "authorization=Basic x"
    (
        re.compile(r"(?i)\b(authorization[\"']?\s*[:=]\s*[\"']?)(bearer|basic|token)\s+[^\s\"',;]+"),
        r"\1\2 [REDACTED]",
    ),
    (re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/\-]{8,}=*"), r"\1 [REDACTED]"),
    # JSON Web Tokens (three base64url segments, the first two JSON objects)
    (re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}"), "[REDACTED:jwt]"),
    # Hugging Face tokens
    (re.compile(r"\bhf_[A-Za-z0-9]{20,}\b"), "[REDACTED:hf_token]"),
    # Google API keys and OAuth access tokens
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{35}"), "[REDACTED:google_api_key]"),
    (re.compile(r"\bya29\.[0-9A-Za-z_.\-]{10,}"), "[REDACTED:oauth_token]"),
    # GitHub, OpenAI-style and Slack tokens
    (re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})\b"), "[REDACTED:token]"),
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{20,}"), "[REDACTED:api_key]"),
    (re.compile(r"\bxox[abpr]-[A-Za-z0-9-]{10,}"), "[REDACTED:token]"),
    # AWS access key ids
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), "[REDACTED:aws_key_id]"),
    # user:password@ in URLs
    (re.compile(r"(://)[^/\s:@]*:[^/\s@]+@"), r"\1[REDACTED]@"),  # redis://:pw@host too
    # a secret flag's value as the next word of a logged command line: "--api-key VALUE"
    (
        re.compile(
            r"(?i)(?<![\w-])(--?[\w.-]*?(?:password|passwd|secret|token|api[_-]?key|access[_-]?key"
            r"|credentials?))(\s+)(?!-|\[REDACTED)([^\s\"',;]+)"
        ),
        r"\1\2[REDACTED]",
    ),
    # key=value / key: value / "key": "value" for secret-looking keys (values None/null/empty are kept)
    (
        re.compile(
            r"(?i)(?<![A-Za-z0-9])(" + _KEY_NAMES + r")([\"']?\s*[:=]\s*\[?\s*)"  # [: vLLM's api_key=['...']
            r"(?!(?:None|null|''|\"\"|False|True|\[?REDACTED)\b)"
            r"(\"[^\"]*\"|'[^']*'|[^\s,;&\"'}\]\[]+)"
        ),
        lambda m: m.group(1) + m.group(2) + _keep_quotes(m.group(3)),
    ),
]


def might_hold_secret(text: str) -> bool:
    """The cheap gate: False means ``redact`` would leave ``text`` as it is."""
    return bool(_SECRET_HINT.search(text.lower()))


def redact(text: str) -> str:
    """``text`` with credentials replaced by ``[REDACTED...]`` markers.

    Covers bearer/basic authorization headers, Hugging Face ``hf_`` tokens, Google API keys
    (``AIza...``), OAuth access tokens (``ya29.``), PEM private keys, JWTs, AWS key ids, GitHub /
    OpenAI-style / Slack tokens, ``user:pass@`` in URLs, and the values of ``password=``, ``token=``,
    ``secret=``, ``api_key=`` (and ``: `` / JSON forms, any prefix such as ``HF_TOKEN=``).
    """
    if not text or not _SECRET_HINT.search(text.lower()):
        return text
    for pattern, repl in _REDACTIONS:
        text = pattern.sub(repl, text)
    return text


#: A mapping key that names a secret (``HF_TOKEN``, ``db_password``, ``api_key``, ``credentials``).
_SECRET_KEY = re.compile(r"(?i)^(?!.*tokens$)" + _KEY_NAMES + r"s?$")  # MAX_TOKENS is a number


def redact_data(obj: Any, keep: frozenset[str] = frozenset()) -> Any:
    """A JSON-like value with secrets hidden: string values under secret-looking keys (and the ``value``
    of ``{"name": "HF_TOKEN", "value": ...}`` pairs, as Cloud Run lists env vars) become
    ``[REDACTED]``; every other string goes through ``redact``. Keys in ``keep`` are left as they are."""
    if isinstance(obj, dict):
        name = obj.get("name")
        secret_pair = isinstance(name, str) and bool(_SECRET_KEY.match(name)) and "value" in obj
        out: dict[Any, Any] = {}
        for k, v in obj.items():
            if k in keep:
                out[k] = v
            elif (
                isinstance(v, str)
                and v
                and ((isinstance(k, str) and _SECRET_KEY.match(k)) or (secret_pair and k == "value"))
            ):
                out[k] = "[REDACTED]"
            else:
                out[k] = redact_data(v, keep)
        return out
    if isinstance(obj, list | tuple):
        if obj and all(isinstance(v, str) for v in obj):
            return redact_args(obj)  # a command line: "--api-key", "VALUE"
        return [redact_data(v, keep) for v in obj]
    if isinstance(obj, str):
        return redact(obj)
    return obj


_SECRET_FLAG = re.compile(
    r"^--?[\w.-]*(?:password|passwd|secret|token|api[_-]?key|access[_-]?key|credentials?)$", re.I
)


def redact_args(args: Sequence[str]) -> list[str]:
    """A command line with secrets removed: ``--api-key VALUE`` (value in the next item) as well as
    everything ``redact`` catches inside single items (``--api-key=VALUE``, tokens, keys)."""
    out: list[str] = []
    hide_next = False
    for a in args:
        if hide_next and not a.startswith("--"):
            out.append("[REDACTED]")
            hide_next = False
            continue
        hide_next = bool(_SECRET_FLAG.match(a))
        out.append(redact(a))
    return out


_Spec = TypeVar("_Spec", bound="BaseModel")


def redact_spec(spec: _Spec) -> _Spec:
    """A service spec (``mcp_tools.incident.ServiceSpec``) as it may be stored or shown: secrets in
    its args (``--api-key VALUE`` too) and env values redacted, everything else as it was. Redacting a
    redacted spec changes nothing; the real spec is only ever read from Cloud Run, never stored."""
    env = {str(k): str(v) for k, v in redact_data(dict(spec.env)).items()}  # type: ignore[attr-defined]
    return spec.model_copy(update={"args": redact_args(spec.args), "env": env})  # type: ignore[attr-defined]
