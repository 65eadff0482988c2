"""The incident file (SPEC.md section 3): one recorded incident per YAML file, or per JSON Lines file.

Unknown keys are ignored; a missing required key or a wrong type is a ``UserError`` that names the
file and the key. Used by ``gemma-sre diagnose``, the eval harness and the sandbox (``--incident``).

Two formats. YAML (``.yaml``/``.yml``, or any other name): SPEC section 3. JSON Lines (``.jsonl``): the
first line is the header, a JSON object with every key but ``logs``; each further non-blank line is one
log entry (a JSON object with the keys of one ``logs`` item). Both are read as a stream: a YAML
incident's ``logs`` block sequence is parsed a few thousand entries at a time (a ``logs`` written in
flow style, ``logs: [...]``, is parsed whole), so a long incident costs its entries, not a document
tree. JSON Lines is the faster of the two (PyYAML builds its objects in Python).

Limits (each refused with one ``UserError`` that names the file and the limit; nothing is truncated):

- the file: a regular file (not ``/dev/zero``, a FIFO, a directory) of at most ``MAX_FILE_BYTES``
  (256 MiB), UTF-8;
- a physical line: at most ``MAX_LINE_BYTES`` (4 MiB);
- a log entry's text (``text``, or the structured payload's message): at most ``MAX_ENTRY_CHARS``
  (1 MiB characters);
- log entries: at most ``MAX_LOG_ENTRIES`` (2,000,000);
- YAML aliases: at most ``MAX_ALIASES`` (100) alias uses in a file, expanding to at most
  ``MAX_ALIAS_EXPANSION`` (100,000) nodes in all; a recursive alias is refused; nesting at most
  ``MAX_DEPTH`` (100) levels.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mcp_tools.errors import UserError
from mcp_tools.remediation import RemediationKind
from mcp_tools.service_models import ServiceSpec as ServiceSpec
from mcp_tools.service_models import StartupProbe as StartupProbe
from mcp_tools.taxonomy import Category

MAX_FILE_BYTES = 256 * 2**20
MAX_LINE_BYTES = 4 * 2**20
MAX_ENTRY_CHARS = 2**20
MAX_LOG_ENTRIES = 2_000_000
MAX_ALIASES = 100
MAX_ALIAS_EXPANSION = 100_000
MAX_DEPTH = 100
#: Entries parsed per YAML chunk when streaming a ``logs`` block sequence.
_CHUNK_ENTRIES = 5_000

SEVERITIES = ("DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL", "ALERT", "EMERGENCY")

_SEVERITY = {s: s for s in SEVERITIES}


class _Lenient(BaseModel):
    # Built on first use: an incident is read by a command or a tool call, never at a server's start.
    model_config = ConfigDict(extra="ignore", defer_build=True)


class LogLine(_Lenient):
    timestamp: str | None = None
    severity: str = "DEFAULT"
    text: str | None = None
    json_payload: dict[str, Any] | None = Field(default=None, alias="json")
    revision: str | None = None  # the Cloud Run revision that wrote the line, when the source says

    @field_validator("text")
    @classmethod
    def _text_size(cls, v: str | None) -> str | None:
        if v is not None and len(v) > MAX_ENTRY_CHARS:
            raise ValueError(f"log entry text longer than the limit of {MAX_ENTRY_CHARS:,} characters")
        return v

    @field_validator("severity", mode="before")
    @classmethod
    def _severity(cls, v: Any) -> str:
        s = str(v).upper() if v is not None else "DEFAULT"
        if s == "WARN":
            s = "WARNING"
        if s not in _SEVERITY:
            raise ValueError(f"unknown severity {v!r} (one of {', '.join(SEVERITIES)})")
        return _SEVERITY[s]  # one string object per severity, not one per line

    @property
    def message(self) -> str:
        """The line as text: the text payload, or the structured payload's message (else the JSON)."""
        if self.text is not None:
            return self.text
        if self.json_payload is not None:
            for key in ("message", "msg", "textPayload"):
                if isinstance(self.json_payload.get(key), str):
                    return str(self.json_payload[key])
            return json.dumps(self.json_payload, sort_keys=True)
        return ""

    @property
    def record_text(self) -> str:
        """The whole record as one text: the text payload (a request log's method, URL, status and
        latency), or the structured payload as JSON with its keys sorted. What ``gemma-sre logs`` prints,
        and what a log text filter is matched against: one text per payload, whatever order its keys
        came in (the writer's, the API's; a redacted payload comes back sorted), its words as written
        (``café``, not ``caf\\u00e9``: what a person types into a filter)."""
        if self.text is not None:
            return self.text
        return json.dumps(self.json_payload or {}, sort_keys=True, default=str, ensure_ascii=False)


class Expected(_Lenient):
    category: str
    remediation_kinds: list[str] = Field(default_factory=list)
    evidence: list[str] = Field(default_factory=list)
    forbidden_kinds: list[str] = Field(default_factory=list)

    @field_validator("category")
    @classmethod
    def _category(cls, v: str) -> str:
        if v not in Category.values():
            raise ValueError(f"unknown category {v!r}")
        return v

    @field_validator("remediation_kinds", "forbidden_kinds")
    @classmethod
    def _kinds(cls, v: list[str]) -> list[str]:
        bad = [k for k in v if k not in set(RemediationKind)]
        if bad:
            raise ValueError(f"unknown remediation kind(s) {bad}")
        return v


class IncidentSeries(_Lenient):
    """One recorded Cloud Monitoring series: a ``mcp_tools.monitoring`` catalog key, the labels that
    tell it apart (``instance``, ``response_code_class``), one value per period, oldest first."""

    key: str
    labels: dict[str, str] = Field(default_factory=dict)
    points: list[float]

    @field_validator("key")
    @classmethod
    def _known(cls, v: str) -> str:
        from mcp_tools.monitoring import BY_KEY

        if v not in BY_KEY:
            raise ValueError(f"unknown series {v!r} (one of {', '.join(BY_KEY)})")
        return v


class IncidentSeriesBlock(_Lenient):
    """The optional ``series:`` block (SPEC section 3, extended): the series the incident's observe
    step read, aligned to ``period_s``, the last point of each ending at ``end`` (RFC 3339)."""

    end: str
    period_s: float = Field(default=60.0, ge=60, le=3600)
    items: list[IncidentSeries] = Field(default_factory=list)

    def series_set(self, service: str) -> Any:
        """As ``mcp_tools.monitoring.SeriesSet`` (what a live observe step holds)."""
        from datetime import datetime, timedelta

        from mcp_tools.monitoring import BY_KEY, MAX_POINTS, Point, Series, SeriesSet

        try:
            end = datetime.fromisoformat(self.end.replace("Z", "+00:00"))
        except ValueError:
            raise UserError(f"series.end must be an RFC 3339 time, not {self.end!r}") from None

        def at(i: int) -> str:
            return (end - timedelta(seconds=self.period_s * i)).strftime("%Y-%m-%dT%H:%M:%SZ")

        n = min(MAX_POINTS, max((len(x.points) for x in self.items), default=0))
        out = SeriesSet(service=service, start=at(n), end=at(0), period_s=self.period_s)
        for x in self.items:
            vals = x.points[-MAX_POINTS:]
            pts = [Point(t=at(len(vals) - 1 - i), v=v) for i, v in enumerate(vals)]
            out.series.append(
                Series(key=x.key, metric_type=BY_KEY[x.key].types[0], labels=dict(x.labels),
                       unit=BY_KEY[x.key].unit, points=pts)
            )  # fmt: skip
            out.points_read += len(pts)
        return out


class Incident(_Lenient):
    id: str
    title: str
    source: str | None = None
    service: ServiceSpec | None = None
    model_config_: dict[str, Any] = Field(default_factory=dict, alias="model_config")
    logs: list[LogLine]
    metrics: str | None = None
    series: IncidentSeriesBlock | None = None  # optional: Cloud Monitoring's series (SPEC 3, extended)
    expected: Expected | None = None
    #: ``real`` (log lines copied verbatim from a public source) or ``composed`` (written from real
    #: wording); None when the file does not say.
    provenance: str | None = None
    path: Path | None = Field(default=None, exclude=True)


def _loc(err: Any) -> str:
    parts = [str(p) for p in err.get("loc", ())]
    return ".".join(parts) or "(top level)"


def _entry_error(path: Path | str, i: int, e: ValidationError) -> UserError:
    first = e.errors()[0]
    loc = ".".join(["logs", str(i), *(str(p) for p in first.get("loc", ()))])
    return UserError(f"{path}: bad value for '{loc}': {first.get('msg')}")


def parse_incident(data: Any, path: Path | str = "<incident>", logs: list[LogLine] | None = None) -> Incident:
    """Validate a parsed document as an incident; errors name the file and the key. ``logs``, when
    given, are entries already validated (a streamed file's), used instead of ``data["logs"]``."""
    if not isinstance(data, dict):
        raise UserError(f"{path}: an incident file must be a YAML mapping, not {type(data).__name__}")
    if logs is not None:
        data = {**data, "logs": []}
    elif isinstance(data.get("logs"), list) and len(data["logs"]) > MAX_LOG_ENTRIES:
        raise UserError(f"{path}: more than the limit of {MAX_LOG_ENTRIES:,} log entries")
    try:
        inc = Incident.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        kind = "missing required key" if first.get("type") == "missing" else "bad value for"
        msg = "" if first.get("type") == "missing" else f": {first.get('msg')}"
        raise UserError(f"{path}: {kind} '{_loc(first)}'{msg}") from None
    if logs is not None:
        inc.logs = logs  # no copy: the list the stream built
    for i, ln in enumerate(inc.logs):
        if ln.text is None and ln.json_payload is not None and len(ln.message) > MAX_ENTRY_CHARS:
            raise UserError(
                f"{path}: log entry {i} is longer than the limit of {MAX_ENTRY_CHARS:,} characters"
            )
    inc.path = Path(path)
    return inc


# Reading -----------------------------------------------------------------------------------------


class _Refused(UserError):
    """A limit met, or a file that cannot be read: final, whatever the format."""


class _Fallback(Exception):
    """The YAML is not in the shape the stream cuts (``logs`` in flow style, odd indentation): parse
    it whole."""


def _open_incident(p: Path) -> IO[bytes]:
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise _Refused(f"{p}: no such incident file") from None
    except OSError as e:
        raise _Refused(f"{p}: cannot read incident file ({e.__class__.__name__})") from None
    if stat.S_ISDIR(st.st_mode):
        raise _Refused(f"{p}: cannot read incident file (IsADirectoryError)")
    if not stat.S_ISREG(st.st_mode):
        raise _Refused(f"{p}: not a regular file (an incident file is a regular file)")
    if st.st_size > MAX_FILE_BYTES:
        raise _Refused(f"{p}: larger than the limit of {MAX_FILE_BYTES // 2**20} MiB")
    try:
        return p.open("rb")
    except OSError as e:
        raise _Refused(f"{p}: cannot read incident file ({e.__class__.__name__})") from None


def _lines(p: Path, f: IO[bytes]) -> Iterator[str]:
    """The file's lines (with their ends), each checked against the line and file limits."""
    total = 0
    n = 0
    while True:
        b = f.readline(MAX_LINE_BYTES + 1)
        if not b:
            return
        n += 1
        total += len(b)
        if len(b) > MAX_LINE_BYTES:
            raise _Refused(f"{p}: line {n} is longer than the limit of {MAX_LINE_BYTES // 2**20} MiB")
        if total > MAX_FILE_BYTES:
            raise _Refused(f"{p}: larger than the limit of {MAX_FILE_BYTES // 2**20} MiB")
        try:
            yield b.decode("utf-8")
        except UnicodeDecodeError:
            raise _Refused(f"{p}: line {n} is not UTF-8 text") from None


def _yaml_error(p: Path, e: Exception, line_offset: int = 0) -> UserError:
    mark = getattr(e, "problem_mark", None)
    where = f" at line {mark.line + 1 + line_offset}" if mark is not None else ""
    return UserError(f"{p}: not valid YAML{where}")


def _children(node: Any) -> list[Any]:
    import yaml

    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [x for kv in node.value for x in kv]
    return []


def _check_node(p: Path, node: Any, budget: list[int]) -> None:
    """Refuse alias bombs and deep nesting in a composed YAML node graph (before anything is built).

    ``budget`` is [aliases left, expansion left], shared by every chunk of one file."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Any, int, bool]] = [(node, 1, False)]
    while stack:
        n, depth, done = stack.pop()
        key = id(n)
        if done:
            on_path.discard(key)
            sizes[key] = 1 + sum(sizes[id(c)] for c in _children(n))
            continue
        if key in sizes or key in on_path:  # the node was met before: an alias
            if key in on_path:
                raise _Refused(f"{p}: a recursive YAML alias (refused)")
            budget[0] -= 1
            budget[1] -= sizes[key]
            if budget[0] < 0:
                raise _Refused(f"{p}: more than the limit of {MAX_ALIASES} YAML aliases")
            if budget[1] < 0:
                raise _Refused(f"{p}: YAML aliases expand past the limit of {MAX_ALIAS_EXPANSION:,} nodes")
            continue
        if depth > MAX_DEPTH:
            raise _Refused(f"{p}: YAML nested deeper than the limit of {MAX_DEPTH} levels")
        on_path.add(key)
        stack.append((n, depth, True))
        for c in reversed(_children(n)):
            stack.append((c, depth + 1, False))


def _check_depth(p: Path, node: Any) -> None:
    """``_check_node`` for a document with no alias in it (each node met once): only its nesting is
    checked, a walk over its collections (a log chunk's scalars are most of its nodes)."""
    import yaml

    stack: list[tuple[Any, int]] = [(node, 1)]
    while stack:
        n, depth = stack.pop()
        kids = _children(n)
        if kids and depth >= MAX_DEPTH:  # the children are one level deeper
            raise _Refused(f"{p}: YAML nested deeper than the limit of {MAX_DEPTH} levels")
        stack.extend((c, depth + 1) for c in kids if not isinstance(c, yaml.ScalarNode))


def _yaml_load(p: Path, text: str, budget: list[int], line_offset: int = 0) -> Any:
    """Parse one YAML document with the C loader (when PyYAML has libyaml: about ten times faster),
    its aliases and nesting checked before it is constructed."""
    import yaml

    loader_cls = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    loader = loader_cls(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if "*" in text:  # an alias is written *name: without one the graph is a tree
            _check_node(p, node, budget)
        else:
            _check_depth(p, node)
        return loader.construct_document(node)
    except yaml.YAMLError as e:
        raise _yaml_error(p, e, line_offset) from None
    except RecursionError:
        raise _Refused(f"{p}: YAML nested deeper than the limit of {MAX_DEPTH} levels") from None
    finally:
        loader.dispose()


_FIELDS_SETS: dict[frozenset[str], set[str]] = {}


def _entry(item: Any) -> LogLine:
    """One validated log entry, compact: a long incident holds a million of these, and pydantic's
    per-instance record of which fields were given (used by ``exclude_unset``, which nothing here
    asks for) is shared between entries that gave the same fields: a third of an entry's memory."""
    ln = LogLine.model_validate(item)
    given = ln.__pydantic_fields_set__
    shared = _FIELDS_SETS.setdefault(frozenset(given), given)
    if shared is not given:
        object.__setattr__(ln, "__pydantic_fields_set__", shared)
    return ln


def _entries(p: Path, items: Any, start: int, out: list[LogLine]) -> None:
    if not isinstance(items, list):
        raise _Fallback
    if len(out) + len(items) > MAX_LOG_ENTRIES:
        raise _Refused(f"{p}: more than the limit of {MAX_LOG_ENTRIES:,} log entries")
    for i, item in enumerate(items, start):
        try:
            out.append(_entry(item))
        except ValidationError as e:
            raise _entry_error(p, i, e) from None


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _load_yaml_stream(p: Path) -> Incident:
    """A YAML incident whose ``logs`` is a block sequence: the rest of the document parsed as one,
    the entries a chunk at a time (each chunk is itself a valid YAML sequence)."""
    header: list[str] = []
    logs: list[LogLine] = []
    budget = [MAX_ALIASES, MAX_ALIAS_EXPANSION]
    chunk: list[str] = []
    chunk_items = 0
    chunk_line = 0  # the file line (0-based) the chunk starts at
    state = "header"  # -> "logs" (inside the sequence) -> "after"
    ind = -1
    with _open_incident(p) as f:
        for n, line in enumerate(_lines(p, f)):
            if state == "header":
                if line.startswith("logs:"):
                    rest = line[5:].strip()
                    if rest and not rest.startswith("#"):
                        raise _Fallback  # ``logs: [...]``, ``logs: []``, an anchor ...
                    header.append("logs: []\n")
                    state = "logs"
                    chunk_line = n + 1
                else:
                    header.append(line)
                continue
            if state == "logs":
                body = line.strip()
                if line.startswith("\t"):
                    raise _Fallback
                if not body or body.startswith("#"):
                    (chunk if chunk else header).append(line if chunk else "\n")
                    if not chunk:
                        chunk_line = n + 1
                    continue
                col = _indent(line)
                item = line[col:].startswith("- ") or line[col:].rstrip("\r\n") == "-"
                if ind < 0:
                    if not item:
                        if col == 0:  # ``logs:`` with no entries, then the next key
                            state = "after"
                            header.append(line)
                            continue
                        raise _Fallback
                    ind = col
                if col > ind:
                    chunk.append(line)
                    continue
                if col == ind and item:
                    if chunk_items >= _CHUNK_ENTRIES:
                        _entries(p, _yaml_load(p, "".join(chunk), budget, chunk_line), len(logs), logs)
                        header.extend("\n" * len(chunk))
                        chunk, chunk_items, chunk_line = [], 0, n
                    chunk.append(line)
                    chunk_items += 1
                    continue
                if col != 0:
                    raise _Fallback
                state = "after"
                header.append(line)
                continue
            header.append(line)
    if chunk:
        _entries(p, _yaml_load(p, "".join(chunk), budget, chunk_line), len(logs), logs)
        header.extend("\n" * len(chunk))
    data = _yaml_load(p, "".join(header), budget)
    if state == "header":
        return parse_incident(data, p)  # no ``logs`` key: the usual error
    if isinstance(data, dict) and data.get("logs") != []:
        raise _Fallback  # a second ``logs`` key, or one the cut misread
    return parse_incident(data, p, logs=logs)


def _load_yaml_whole(p: Path) -> Incident:
    with _open_incident(p) as f:
        text = "".join(_lines(p, f))
    return parse_incident(_yaml_load(p, text, [MAX_ALIASES, MAX_ALIAS_EXPANSION]), p)


def _load_jsonl(p: Path) -> Incident:
    header: Any = None
    logs: list[LogLine] = []
    with _open_incident(p) as f:
        for n, line in enumerate(_lines(p, f), 1):
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
            except (ValueError, RecursionError):
                raise UserError(f"{p}: line {n} is not a JSON document") from None
            if header is None:
                if not isinstance(doc, dict):
                    raise UserError(f"{p}: line {n}: the header of a JSON Lines incident must be an object")
                if "logs" in doc:
                    raise UserError(
                        f"{p}: line {n}: the header of a JSON Lines incident has no 'logs' "
                        "(each further line is one log entry)"
                    )
                header = doc
                continue
            if len(logs) >= MAX_LOG_ENTRIES:
                raise _Refused(f"{p}: more than the limit of {MAX_LOG_ENTRIES:,} log entries")
            try:
                logs.append(_entry(doc))
            except ValidationError as e:
                raise _entry_error(p, len(logs), e) from None
    if header is None:
        raise UserError(f"{p}: an empty JSON Lines incident (the first line is the header object)")
    return parse_incident(header, p, logs=logs)


def load_incident(path: Path | str) -> Incident:
    """Read one incident file (SPEC.md section 3), YAML or JSON Lines, within the module's limits."""
    p = Path(path)
    if p.suffix.lower() == ".jsonl":
        return _load_jsonl(p)
    try:
        return _load_yaml_stream(p)
    except _Fallback:
        pass
    except _Refused:
        raise
    except UserError:
        pass  # the cut may have split what YAML reads otherwise: the whole document's own answer
    return _load_yaml_whole(p)


def load_incident_dir(directory: Path | str) -> tuple[list[Incident], list[tuple[Path, str]]]:
    """Every ``*.yaml``/``*.yml``/``*.jsonl`` below a directory: the good incidents, and (path, error)
    for the bad."""
    d = Path(directory)
    if not d.is_dir():
        raise UserError(f"{d}: not a directory of incident files")
    good: list[Incident] = []
    bad: list[tuple[Path, str]] = []
    for p in sorted([*d.rglob("*.yaml"), *d.rglob("*.yml"), *d.rglob("*.jsonl")]):
        try:
            good.append(load_incident(p))
        except UserError as e:
            bad.append((p, str(e)))
    return good, bad
