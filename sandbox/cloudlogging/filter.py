"""A parser for the subset of the Cloud Logging query language that operators use.

Grammar (https://cloud.google.com/logging/docs/view/logging-query-language). Note the precedence:
NOT binds tightest, then OR, then AND (explicit or implicit by juxtaposition), so ``a OR b c`` is
``(a OR b) AND c``::

    query      := conj EOF
    conj       := disj ( ["AND"] disj )*
    disj       := unary ( "OR" unary )*
    unary      := ("NOT" | "-") unary | primary
    primary    := "(" conj ")" | "log_id" "(" STRING ")" | comparison | value   (global search)
    comparison := field OP rhs
    field      := NAME ( "." (NAME | STRING) )*
    OP         := "=" | "!=" | ":" | "=~" | "!~" | "<" | "<=" | ">" | ">="
    rhs        := value | "*" (with ":", presence) | "(" value ( ("OR" | "AND")? value )* ")"
    value      := STRING | WORD | NUMBER

Semantics: ``=`` is an exact match, ``:`` a case-insensitive substring ("has"), ``=~``/``!~`` a regular
expression search (RE2 is close enough to Python's ``re`` for the patterns people write), ``<``..``>=``
compare numbers, timestamps (``timestamp``, ``receiveTimestamp``) and severities (by LogSeverity
order) as such, and other strings lexically. A comparison on a missing field is false (``!=`` and
``NOT`` of it are true). Anything else (other functions such as ``sample()``, ``SEARCH()``, unknown
top-level fields) is a ``FilterError`` saying what is not supported.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from sandbox.clock import parse_time

SEVERITY_RANK = {
    "DEFAULT": 0,
    "DEBUG": 100,
    "INFO": 200,
    "NOTICE": 300,
    "WARNING": 400,
    "ERROR": 500,
    "CRITICAL": 600,
    "ALERT": 700,
    "EMERGENCY": 800,
}
_SEVERITY_ALIASES = {"WARN": "WARNING", "FATAL": "CRITICAL"}

#: top-level LogEntry fields a filter may name (camelCase, as on the wire; snake_case is accepted too)
TOP_LEVEL = {
    "logName",
    "resource",
    "timestamp",
    "receiveTimestamp",
    "severity",
    "insertId",
    "httpRequest",
    "labels",
    "operation",
    "trace",
    "spanId",
    "traceSampled",
    "sourceLocation",
    "textPayload",
    "jsonPayload",
    "protoPayload",
    "split",
}
_TIME_FIELDS = {"timestamp", "receiveTimestamp"}

Entry = dict[str, Any]
Predicate = Callable[[Entry], bool]


class FilterError(ValueError):
    """The filter cannot be parsed, or uses syntax the sandbox does not support."""


@dataclass
class Tok:
    kind: str  # STRING WORD OP LPAREN RPAREN EOF
    text: str
    pos: int


_OPS = ("=~", "!~", "!=", "<=", ">=", "=", ":", "<", ">")
_WORD_END = set(" \t\r\n()=!<>:\"'")


def tokenize(src: str) -> list[Tok]:
    toks: list[Tok] = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if c.isspace():
            i += 1
            continue
        if c == "(":
            toks.append(Tok("LPAREN", c, i))
            i += 1
            continue
        if c == ")":
            toks.append(Tok("RPAREN", c, i))
            i += 1
            continue
        if c in "\"'":
            quote_char, j, buf = c, i + 1, []
            while j < n and src[j] != quote_char:
                if src[j] == "\\" and j + 1 < n:
                    nxt = src[j + 1]
                    buf.append(
                        {"n": "\n", "t": "\t", "r": "\r"}.get(nxt, nxt if nxt in "\"'\\" else "\\" + nxt)
                    )
                    j += 2
                    continue
                buf.append(src[j])
                j += 1
            if j >= n:
                raise FilterError(f"unterminated string starting at column {i + 1}")
            toks.append(Tok("STRING", "".join(buf), i))
            i = j + 1
            continue
        op = next((o for o in _OPS if src.startswith(o, i)), None)
        if op is not None:
            toks.append(Tok("OP", op, i))
            i += len(op)
            continue
        if c == "-" and (i + 1 < n and not src[i + 1].isspace()) and (not toks or toks[-1].kind != "OP"):
            toks.append(Tok("NOT", "-", i))
            i += 1
            continue
        j = i
        while j < n and src[j] not in _WORD_END:
            j += 1
        if j == i:
            raise FilterError(f"unexpected character {c!r} at column {i + 1}")
        toks.append(Tok("WORD", src[i:j], i))
        i = j
    toks.append(Tok("EOF", "", n))
    return toks


def _camel(name: str) -> str:
    if "_" not in name:
        return name
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _getter(path: tuple[str, ...]) -> Callable[[Entry], Any]:
    """A fast accessor for a field path (missing -> _MISSING)."""
    if len(path) == 1:
        (a,) = path
        return lambda e: e.get(a, _MISSING)
    if len(path) == 2:
        a, b = path

        def get2(e: Entry) -> Any:
            v = e.get(a)
            return v.get(b, _MISSING) if isinstance(v, dict) else _MISSING

        return get2
    if len(path) == 3:
        a, b, c = path

        def get3(e: Entry) -> Any:
            v = e.get(a)
            if not isinstance(v, dict):
                return _MISSING
            v = v.get(b)
            return v.get(c, _MISSING) if isinstance(v, dict) else _MISSING

        return get3
    return lambda e: _lookup(e, path)


def _lookup(entry: Entry, path: tuple[str, ...]) -> Any:
    cur: Any = entry
    for part in path:
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        else:
            return _MISSING
    return cur


class _Missing:
    pass


_MISSING = _Missing()


def _as_number(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v)
        except ValueError:
            return None
    return None


def _severity_rank(v: Any) -> int | None:
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        s = v.strip().upper()
        s = _SEVERITY_ALIASES.get(s, s)
        if s in SEVERITY_RANK:
            return SEVERITY_RANK[s]
        if s.isdigit():
            return int(s)
    return None


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict | list):
        import json

        return json.dumps(v, sort_keys=True, ensure_ascii=False)  # the words, not their escapes
    return str(v)


def _combine(parts: list[Predicate], *, short: bool) -> Predicate:
    """AND (``short=False``: the first false part decides) or OR (``short=True``: the first true one)."""
    if len(parts) == 1:
        return parts[0]
    if len(parts) == 2:
        a, b = parts
        return (lambda e: a(e) or b(e)) if short else (lambda e: a(e) and b(e))

    def pred(e: Entry) -> bool:
        for p in parts:  # a plain loop is faster than all() / any() over a generator
            if bool(p(e)) is short:
                return short
        return not short

    return pred


def _all(parts: list[Predicate]) -> Predicate:
    return _combine(parts, short=False)


def _any(parts: list[Predicate]) -> Predicate:
    return _combine(parts, short=True)


class _Parser:
    def __init__(self, src: str) -> None:
        self.src = src
        self.toks = tokenize(src)
        self.i = 0
        self.upper_bound: Callable[[float], float] | None = None

    # -- token helpers
    def peek(self) -> Tok:
        return self.toks[self.i]

    def next(self) -> Tok:
        t = self.toks[self.i]
        self.i += 1
        return t

    def _kw(self, t: Tok, word: str) -> bool:
        return t.kind == "WORD" and t.text == word

    def error(self, msg: str, t: Tok | None = None) -> FilterError:
        t = t or self.peek()
        return FilterError(f"{msg} at column {t.pos + 1}")

    # -- grammar
    def parse(self) -> Predicate:
        if self.peek().kind == "EOF":
            return lambda e: True
        pred = self.conj()
        if self.peek().kind != "EOF":
            raise self.error(f"unexpected {self.peek().text!r}")
        return pred

    def conj(self) -> Predicate:
        parts = [self.disj()]
        while True:
            t = self.peek()
            if t.kind in ("EOF", "RPAREN"):
                break
            if self._kw(t, "AND"):
                self.next()
            parts.append(self.disj())
        return _all(parts)

    def disj(self) -> Predicate:
        parts = [self.unary()]
        while self._kw(self.peek(), "OR"):
            self.next()
            parts.append(self.unary())
        return _any(parts)

    def unary(self) -> Predicate:
        t = self.peek()
        if t.kind == "NOT" or self._kw(t, "NOT"):
            self.next()
            inner = self.unary()
            return lambda e: not inner(e)
        return self.primary()

    def primary(self) -> Predicate:
        t = self.peek()
        if t.kind == "LPAREN":
            self.next()
            inner = self.conj()
            if self.next().kind != "RPAREN":
                raise self.error("expected ')'", t)
            return inner
        if t.kind == "EOF":
            raise self.error("unexpected end of filter")
        if t.kind in ("RPAREN", "OP"):
            raise self.error(f"unexpected {t.text!r}")
        if t.kind == "WORD" and t.text in ("AND", "OR"):
            raise self.error(f"unexpected {t.text}")
        # function call?
        if t.kind == "WORD" and self.toks[self.i + 1].kind == "LPAREN":
            return self.function()
        if t.kind == "WORD" and self.toks[self.i + 1].kind == "OP":
            return self.comparison()
        if t.kind == "STRING" or t.kind == "WORD":
            # a dotted field followed by an operator may also have quoted segments: a."b".c = x
            j = self.i
            while self.toks[j].kind in ("WORD", "STRING") and self.toks[j + 1].kind in ("WORD", "STRING"):
                j += 1
            if t.kind == "WORD" and self.toks[j + 1].kind == "OP" and j > self.i:
                return self.comparison()
            self.next()
            return self.global_search(t.text)
        raise self.error(f"unexpected {t.text!r}")

    def function(self) -> Predicate:
        name = self.next()
        self.next()  # (
        if name.text != "log_id":
            raise self.error(f"unsupported function {name.text}() (the sandbox supports log_id())", name)
        arg = self.next()
        if arg.kind not in ("STRING", "WORD"):
            raise self.error("log_id() takes one quoted log id", arg)
        if self.next().kind != "RPAREN":
            raise self.error("expected ')' after log_id argument", arg)
        suffix = "/logs/" + quote(arg.text, safe="")
        return lambda e: str(e.get("logName", "")).endswith(suffix)

    def field_path(self) -> tuple[str, ...]:
        first = self.next()
        raw = first.text
        # WORD tokens may contain dots; quoted segments follow as STRING tokens glued by '.'
        parts: list[str] = [p for p in raw.split(".")]
        while raw.endswith(".") and self.peek().kind == "STRING":
            seg = self.next().text
            parts[-1:] = [seg]
            raw = seg
            if self.peek().kind == "WORD" and self.peek().text.startswith("."):
                nxt = self.next().text
                parts.extend(nxt[1:].split("."))
                raw = nxt
        if any(p == "" for p in parts):
            raise self.error(f"bad field name {first.text!r}", first)
        top = _camel(parts[0])
        if top not in TOP_LEVEL:
            raise self.error(f"unsupported field {parts[0]!r}", first)
        path = [top]
        for p in parts[1:]:
            # labels keep their spelling; payload and resource sub-fields too, except the well-known ones
            path.append(p)
        if top in ("httpRequest", "sourceLocation", "operation") and len(path) > 1:
            path[1] = _camel(path[1])
        return tuple(path)

    def comparison(self) -> Predicate:
        ftok = self.peek()
        path = self.field_path()
        op_tok = self.next()
        if op_tok.kind != "OP":
            raise self.error("expected a comparison operator", op_tok)
        op = op_tok.text
        vt = self.peek()
        if vt.kind == "LPAREN":
            return self.value_group(path, op)
        if vt.kind == "WORD" and vt.text == "*":
            self.next()
            if op != ":":
                raise self.error("'*' is only allowed with ':' (field presence)", vt)
            return lambda e: _lookup(e, path) is not _MISSING
        if vt.kind not in ("STRING", "WORD"):
            raise self.error(f"expected a value after {op!r}", vt)
        self.next()
        del ftok
        return _compare(path, op, vt.text, vt.kind == "STRING", self, vt)

    def value_group(self, path: tuple[str, ...], op: str) -> Predicate:
        open_tok = self.next()
        preds: list[Predicate] = []
        mode = "OR"
        while True:
            t = self.next()
            if t.kind == "RPAREN":
                break
            if self._kw(t, "OR") or self._kw(t, "AND"):
                mode = t.text
                continue
            if t.kind not in ("STRING", "WORD"):
                raise self.error("expected a value in the parenthesised list", t)
            preds.append(_compare(path, op, t.text, t.kind == "STRING", self, t))
        if not preds:
            raise self.error("empty value list", open_tok)
        if mode == "AND":
            return lambda e: all(p(e) for p in preds)
        return lambda e: any(p(e) for p in preds)

    def global_search(self, text: str) -> Predicate:
        needle = text.lower()

        def pred(e: Entry) -> bool:
            for key in ("textPayload", "jsonPayload", "labels", "resource", "logName", "httpRequest"):
                v = e.get(key)
                if v is not None and needle in _text(v).lower():
                    return True
            return False

        return pred


def _compare(path: tuple[str, ...], op: str, raw: str, quoted: bool, parser: _Parser, tok: Tok) -> Predicate:
    top = path[0]
    if top == "severity" and len(path) == 1:
        want = _severity_rank(raw)
        if want is None:
            raise parser.error(f"unknown severity {raw!r}", tok)
        if op in ("=~", "!~", ":"):
            raise parser.error(f"operator {op!r} is not supported on severity", tok)
        return _ordered(path, op, want, lambda v: _severity_rank(v), key="_severity_rank")
    if top in _TIME_FIELDS and len(path) == 1 and op in ("<", "<=", ">", ">=", "=", "!="):
        try:
            t = parse_time(raw)
        except ValueError:
            raise parser.error(f"bad timestamp {raw!r}", tok) from None
        if op in ("<", "<=") and parser.upper_bound is not None:
            t = parser.upper_bound(t)

        def conv(v: Any) -> float | None:
            if isinstance(v, int | float):
                return float(v)
            try:
                return parse_time(str(v))
            except ValueError:
                return None

        return _ordered(path, op, t, conv, key=f"_{top}_s")
    if top == "logName" and op in ("=", "!=") and "%2F" not in raw and "/logs/" in raw:
        # people often write logName="projects/p/logs/run.googleapis.com/stderr"; Logging wants it encoded
        proj, _, log_id = raw.partition("/logs/")
        raw = f"{proj}/logs/{quote(log_id, safe='')}"
    if op in ("=~", "!~"):
        try:
            rx = re.compile(raw)
        except re.error as ex:
            raise parser.error(f"bad regular expression {raw!r}: {ex}", tok) from None

        def rx_pred(e: Entry) -> bool:
            v = _lookup(e, path)
            if v is _MISSING:
                return False
            return rx.search(_text(v)) is not None

        if op == "=~":
            return rx_pred
        return lambda e: _lookup(e, path) is not _MISSING and not rx_pred(e)
    get = _getter(path)
    if op == ":":
        needle = raw.lower()
        if path == ("textPayload",):

            def has_text(e: Entry) -> bool:
                lc = e.get("_text_lc")
                if lc is None:
                    v = e.get("textPayload")
                    if v is None:
                        return False
                    lc = str(v).lower()
                return needle in lc

            return has_text

        def has(e: Entry) -> bool:
            v = get(e)
            if v is _MISSING:
                return False
            if isinstance(v, str):
                return needle in v.lower()
            return needle in _text(v).lower()

        return has
    if op in ("=", "!="):
        num = None if quoted else _as_number(raw)

        def eq(e: Entry) -> bool:
            v = get(e)
            if v.__class__ is str and num is None:
                return bool(v == raw)
            if v is _MISSING:
                return False
            if num is not None:
                nv = _as_number(v)
                if nv is not None:
                    return nv == num
            if isinstance(v, bool):
                return raw.lower() == ("true" if v else "false")
            return _text(v) == raw

        if op == "=":
            return eq
        return lambda e: not eq(e)
    # ordering on other fields: numbers when both sides are numbers, else strings
    num = _as_number(raw)
    if num is not None:
        return _ordered(path, op, num, _as_number)
    return _ordered(path, op, raw, lambda v: _text(v))


def _ordered(
    path: tuple[str, ...], op: str, want: Any, conv: Callable[[Any], Any], key: str | None = None
) -> Predicate:
    cmp: Callable[[Any, Any], bool] = {
        "<": lambda a, b: a < b,
        "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b,
        ">=": lambda a, b: a >= b,
        "=": lambda a, b: a == b,
        "!=": lambda a, b: a != b,
    }[op]

    def pred(e: Entry) -> bool:
        if key is not None and key in e:
            v = e[key]  # pre-parsed (the store keeps timestamps as floats beside the wire fields)
        else:
            raw = _lookup(e, path)
            if raw is _MISSING:
                return op == "!="
            v = conv(raw)
        if v is None:
            return False
        try:
            return bool(cmp(v, want))
        except TypeError:
            return False

    return pred


def compile_filter(src: str | None, *, upper_bound: Callable[[float], float] | None = None) -> Predicate:
    """Compile a filter into a predicate over LogEntry dicts (wire JSON); ``FilterError`` if unsupported.

    ``upper_bound`` maps the literal of a ``timestamp <``/``<=`` comparison (the sandbox reads a bound
    at the real "now" as its own, possibly later, now)."""
    if src is None or not src.strip():
        return lambda e: True
    if len(src) > 20000:
        raise FilterError("filter is longer than 20000 characters")
    p = _Parser(src)
    p.upper_bound = upper_bound
    try:
        return p.parse()
    except RecursionError:
        raise FilterError("filter is nested too deeply") from None
