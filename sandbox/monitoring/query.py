"""``projects.timeSeries.list`` over the sandbox's raw series: the filter language, the interval,
``aggregation`` (alignment, per-series aligner, cross-series reducer, group-by) and paging. Plain
data in and out; the wire (gRPC) lives in ``grpc_server``. Bad input raises ``ApiError`` with the
canonical status and Google's wording."""

from __future__ import annotations

import base64
import hashlib
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sandbox.errors import ApiError, bad_request
from sandbox.monitoring.model import (
    CUMULATIVE,
    DELTA,
    DISTRIBUTION,
    DOUBLE,
    GAUGE,
    INT64,
    Dist,
    RawSeries,
    SeriesHead,
)

MAX_PAGE_SIZE = 100_000
MAX_POINTS_PER_SERIES = 100_000

# -- the filter language ------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"""\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<op>!=|=|:|\(|\)|,)|(?P<word>[A-Za-z_][A-Za-z0-9_.\-/]*))"""
)
_FUNCS = {"starts_with", "ends_with", "has_substring", "one_of", "monitoring.regex.full_match"}

Pred = Callable[[RawSeries], bool]


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise _bad_filter(text, f"unexpected character at position {pos}")
        kind = m.lastgroup or ""
        val = m.group(kind)
        if kind == "str":
            val = re.sub(r"\\(.)", r"\1", val[1:-1])
        out.append((kind, val))
        pos = m.end()
    return out


def _bad_filter(text: str, why: str) -> ApiError:
    return bad_request(f'Field filter had an invalid value of "{text}": {why}.', field="filter")


def _selector(name: str) -> Callable[[RawSeries], str | None]:
    if name == "metric.type":
        return lambda s: s.metric_type
    if name == "resource.type":
        return lambda s: s.resource_type
    if name == "project":
        return lambda s: s.resource_labels.get("project_id")
    label = _label_field(name)
    if label is not None:
        attr, key = f"{label[0]}_labels", label[1]
        return lambda s, a=attr, k=key: getattr(s, a).get(k)  # type: ignore[misc]
    raise ValueError(name)


def _label_field(name: str) -> tuple[str, str] | None:
    """A label field (``metric.labels.KEY``, ``resource.label.KEY``, ...) as ("metric" or
    "resource", KEY); None for any other field."""
    for prefix, where in (
        ("metric.labels.", "metric"),
        ("metric.label.", "metric"),
        ("resource.labels.", "resource"),
        ("resource.label.", "resource"),
    ):
        if name.startswith(prefix) and len(name) > len(prefix):
            return where, name[len(prefix) :]
    return None


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text)
        self.i = 0
        self.metric_types: set[str] = set()

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> tuple[str, str]:
        t = self.peek()
        if t is None:
            raise _bad_filter(self.text, "unexpected end of the filter")
        self.i += 1
        return t

    def parse(self) -> Pred:
        if not self.toks:
            raise _bad_filter(self.text, "the filter is empty")
        p = self.expr()
        if self.peek() is not None:
            raise _bad_filter(self.text, f"unexpected {self.peek()[1]!r}")  # type: ignore[index]
        return p

    def expr(self) -> Pred:
        terms = [self.conj()]
        while self.peek() == ("word", "OR"):
            self.take()
            terms.append(self.conj())
        return terms[0] if len(terms) == 1 else (lambda s: any(t(s) for t in terms))

    def conj(self) -> Pred:
        terms = [self.unary()]
        while True:
            nxt = self.peek()
            if nxt == ("word", "AND"):
                self.take()
                terms.append(self.unary())
            elif nxt is not None and nxt[0] == "word" and nxt[1] not in ("OR",):
                terms.append(self.unary())  # juxtaposition is AND, as in Google's filters
            elif nxt == ("op", "("):
                terms.append(self.unary())
            else:
                break
        return terms[0] if len(terms) == 1 else (lambda s: all(t(s) for t in terms))

    def unary(self) -> Pred:
        tok = self.take()
        if tok == ("word", "NOT"):
            inner = self.unary()
            return lambda s: not inner(s)
        if tok == ("op", "("):
            inner = self.expr()
            if self.take() != ("op", ")"):
                raise _bad_filter(self.text, "missing ')'")
            return inner
        if tok[0] != "word":
            raise _bad_filter(self.text, f"expected a selector, not {tok[1]!r}")
        try:
            sel = _selector(tok[1])
        except ValueError:
            raise _bad_filter(self.text, f"unknown selector {tok[1]!r}") from None
        op = self.take()
        if op[0] != "op" or op[1] not in ("=", "!=", ":"):
            raise _bad_filter(self.text, f"expected '=', '!=' or ':' after {tok[1]}")
        test = self.value()
        if tok[1] == "metric.type" and op[1] == "=" and isinstance(test, _Eq):
            self.metric_types.add(test.value)
        if op[1] == ":":
            needle = test.value if isinstance(test, _Eq) else None
            if needle is None:
                raise _bad_filter(self.text, "':' takes a string")
            return lambda s: needle in (sel(s) or "")
        if op[1] == "!=":
            return lambda s: not test(sel(s))
        return lambda s: test(sel(s))

    def value(self) -> Any:
        tok = self.take()
        if tok[0] == "str":
            return _Eq(tok[1])
        if tok[0] == "word" and tok[1] in _FUNCS:
            if self.take() != ("op", "("):
                raise _bad_filter(self.text, f"{tok[1]} needs '('")
            args: list[str] = []
            while True:
                a = self.take()
                if a[0] != "str":
                    raise _bad_filter(self.text, f"{tok[1]} takes strings")
                args.append(a[1])
                sep = self.take()
                if sep == ("op", ")"):
                    break
                if sep != ("op", ","):
                    raise _bad_filter(self.text, f"expected ',' or ')' in {tok[1]}")
            return _func(tok[1], args, self)
        raise _bad_filter(self.text, f"expected a string or a function, not {tok[1]!r}")


@dataclass
class _Eq:
    value: str

    def __call__(self, v: str | None) -> bool:
        return v == self.value


def _func(name: str, args: list[str], p: _Parser) -> Callable[[str | None], bool]:
    if name == "one_of":
        allowed = set(args)
        return lambda v: v in allowed
    if len(args) != 1:
        raise _bad_filter(p.text, f"{name} takes one string")
    a = args[0]
    if name == "starts_with":
        return lambda v: (v or "").startswith(a)
    if name == "ends_with":
        return lambda v: (v or "").endswith(a)
    if name == "has_substring":
        return lambda v: a in (v or "")
    try:
        rx = re.compile(a)
    except re.error as e:
        raise _bad_filter(p.text, f"bad regular expression ({e})") from None
    return lambda v: rx.fullmatch(v or "") is not None


def parse_filter(text: str) -> tuple[Pred, set[str]]:
    """The predicate and the metric types a filter names (``metric.type = "..."``)."""
    p = _Parser(text)
    pred = p.parse()
    return pred, p.metric_types


# -- aggregation --------------------------------------------------------------------------------------

_PCT = re.compile(r"^(ALIGN|REDUCE)_PERCENTILE_(\d\d)$")


@dataclass
class Aggregation:
    period_s: float = 0.0
    aligner: str = "ALIGN_NONE"
    reducer: str = "REDUCE_NONE"
    group_by: list[str] = field(default_factory=list)


@dataclass
class OutSeries(SeriesHead):
    points: list[tuple[float, float, Any]]  # (start, end, value), newest first


def _num(v: Any) -> float:
    return v.mean if isinstance(v, Dist) else float(v)


def _align(s: RawSeries, agg: Aggregation, start: float, end: float) -> OutSeries | None:
    a = agg.aligner
    kind, vt = s.kind, s.value_type
    if a in ("ALIGN_RATE", "ALIGN_DELTA") and kind == GAUGE:
        raise bad_request(
            f"The aligner cannot be applied to metrics with kind {kind} and value type {vt}.",
            field="aggregation.perSeriesAligner",
        )
    if a == "ALIGN_RATE" and vt == DISTRIBUTION:
        raise bad_request(
            f"The aligner cannot be applied to metrics with kind {kind} and value type {vt}.",
            field="aggregation.perSeriesAligner",
        )
    pct = _PCT.match(a)
    if pct and kind == CUMULATIVE:
        raise bad_request(
            f"The aligner cannot be applied to metrics with kind {kind} and value type {vt}; "
            "align with ALIGN_DELTA and reduce with REDUCE_PERCENTILE_nn.",
            field="aggregation.perSeriesAligner",
        )
    period = agg.period_s
    n = max(1, math.ceil((end - start) / period))
    buckets: list[list[tuple[float, Any, Any]]] = [[] for _ in range(n)]
    for _start, p_end, raw_value, delta in s.points:
        k = math.floor((end - p_end) / period)  # 0 = the newest period (end - period, end]
        if 0 <= k < n and p_end > end - (k + 1) * period:
            buckets[k].append((p_end, raw_value, delta))
    out: list[tuple[float, float, Any]] = []
    out_kind, out_vt = GAUGE, DOUBLE
    for k, pts in enumerate(buckets):
        if not pts:
            continue
        t_end = end - k * period
        t_start = t_end - period
        vals = [v for _, v, _ in pts]
        value: Any
        deltas = [d for _, _, d in pts]
        if a == "ALIGN_MEAN":
            value = _merge(deltas).mean if vt == DISTRIBUTION else sum(_num(v) for v in vals) / len(pts)
        elif a == "ALIGN_MAX":
            value = max(_num(v) for v in vals)
        elif a == "ALIGN_MIN":
            value = min(_num(v) for v in vals)
        elif a == "ALIGN_SUM":
            value = sum(_num(v) for v in vals)
            out_kind = DELTA
        elif a == "ALIGN_COUNT":
            value = len(pts)
            out_vt = INT64
        elif a == "ALIGN_RATE":
            value = sum(float(d) for d in deltas) / period
        elif a == "ALIGN_DELTA":
            out_kind = DELTA
            if vt == DISTRIBUTION:
                value, out_vt = _merge(deltas), DISTRIBUTION
            else:
                value = sum(float(d) for d in deltas)
                out_vt = INT64 if vt == INT64 else DOUBLE
                if out_vt == INT64:
                    value = round(value)
        elif pct:
            value = _percentile_of(deltas if vt == DISTRIBUTION else vals, float(pct.group(2)))
            if value is None:
                continue  # nothing was observed in this period: no point, not a zero
        elif a == "ALIGN_NEXT_OLDER":
            value = vals[-1]
            out_kind, out_vt = kind if kind != CUMULATIVE else GAUGE, vt
        else:
            raise bad_request(
                f"Unsupported aligner {a} in the sandbox.", field="aggregation.perSeriesAligner"
            )
        out.append((t_start, t_end, value))
    if not out:
        return None
    return OutSeries(s.metric_type, out_kind, out_vt, dict(s.metric_labels), s.resource_type,
                     dict(s.resource_labels), s.unit, out)  # fmt: skip


def _percentile_of(vals: list[Any], q: float) -> float | None:
    """The ``q``-th percentile of numbers, or of distributions merged into one (None: they observed
    nothing)."""
    if vals and isinstance(vals[0], Dist):
        merged = _merge(vals)
        return merged.percentile(q) if merged.count > 0 else None
    return _percentile([float(v) for v in vals], q)


def _merge(dists: list[Any]) -> Dist:
    acc = Dist.empty(dists[0].bounds)
    for d in dists:
        acc = acc.merge(d)
    return acc


def _percentile(vals: list[float], q: float) -> float:
    xs = sorted(vals)
    if not xs:
        return 0.0
    k = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def _group_key(field_name: str) -> tuple[str, str]:
    label = _label_field(field_name)
    if label is not None:
        return label
    if field_name == "resource.type":
        return "resource_type", ""
    raise bad_request(
        f'Field aggregation.groupByFields had an invalid value of "{field_name}".',
        field="aggregation.groupByFields",
    )


def _reduce(series: list[OutSeries], agg: Aggregation) -> list[OutSeries]:
    fields = [_group_key(f) for f in agg.group_by]
    groups: dict[tuple[str, ...], list[OutSeries]] = {}
    for s in series:
        key = tuple(
            s.metric_labels.get(k, "") if w == "metric" else s.resource_labels.get(k, "") if w == "resource"
            else s.resource_type
            for w, k in fields
        )  # fmt: skip
        groups.setdefault(key, []).append(s)
    r = agg.reducer
    pct = _PCT.match(r)
    out: list[OutSeries] = []
    for key, members in groups.items():
        by_t: dict[float, list[tuple[float, Any]]] = {}
        for s in members:
            for p_start, p_end, v in s.points:
                by_t.setdefault(p_end, []).append((p_start, v))
        first = members[0]
        pts: list[tuple[float, float, Any]] = []
        out_vt = DOUBLE
        if not by_t:
            continue
        for t_end in sorted(by_t, reverse=True):
            items = by_t[t_end]
            vals = [v for _, v in items]
            dist = isinstance(vals[0], Dist)
            if r == "REDUCE_SUM":
                if dist:
                    value: Any = _merge(vals)
                    out_vt = DISTRIBUTION
                else:
                    value = sum(float(v) for v in vals)
            elif r == "REDUCE_MEAN":
                value = sum(_num(v) for v in vals) / len(vals)
            elif r == "REDUCE_MAX":
                value = max(_num(v) for v in vals)
            elif r == "REDUCE_MIN":
                value = min(_num(v) for v in vals)
            elif r == "REDUCE_COUNT":
                value, out_vt = len(vals), INT64
            elif pct:
                value = _percentile_of(vals, float(pct.group(2)))
                if value is None:
                    continue  # nothing was observed in this period: no point, not a zero
            else:
                raise bad_request(
                    f"Unsupported reducer {r} in the sandbox.", field="aggregation.crossSeriesReducer"
                )
            pts.append((items[0][0], t_end, value))
        if not pts:
            continue
        metric_labels = {k: v for (w, k), v in zip(fields, key, strict=True) if w == "metric"}
        resource_labels = {k: v for (w, k), v in zip(fields, key, strict=True) if w == "resource"}
        kind = GAUGE if first.kind != DELTA else DELTA
        out.append(
            OutSeries(
                first.metric_type,
                kind,
                out_vt,
                metric_labels,
                first.resource_type,
                resource_labels,
                first.unit,
                pts,
            )
        )
    return out


# -- the call -----------------------------------------------------------------------------------------


@dataclass
class ListRequest:
    name: str
    filter: str
    start: float | None
    end: float | None
    aggregation: Aggregation
    page_size: int = 0
    page_token: str = ""
    headers_only: bool = False


def _fingerprint(req: ListRequest) -> str:
    a = req.aggregation
    raw = f"{req.name}|{req.filter}|{req.start}|{req.end}|{a.period_s}|{a.aligner}|{a.reducer}|{a.group_by}"
    return hashlib.sha256(raw.encode()).hexdigest()[:12]


def list_time_series(backend: Any, req: ListRequest) -> tuple[list[OutSeries], str]:
    """The series one page holds, and the next page's token ('' on the last page)."""
    m = re.fullmatch(r"projects/([^/]+)", req.name or "")
    if m is None:
        raise bad_request(
            f'Field name had an invalid value of "{req.name}": must be projects/PROJECT.', field="name"
        )
    project = m.group(1)
    if not req.filter.strip():
        raise bad_request(
            'Field filter had an invalid value of "": the filter must not be empty.', field="filter"
        )
    pred, types = parse_filter(req.filter)
    if len(types) != 1:
        raise _bad_filter(req.filter, "a time series filter must name exactly one metric.type with '='")
    metric_type = next(iter(types))
    if req.end is None:
        raise bad_request(
            "Field interval.endTime had an invalid value: it is required.", field="interval.end_time"
        )
    end = req.end
    start = req.start if req.start is not None and req.start > 0 else end
    # An end at (or just before) the real "now" means the sandbox's now, whose clock runs ahead by
    # the start-ups it fast-forwarded (as the log store reads ``timestamp<=``): the window keeps its length.
    real = time.time()
    sim_now = backend.clock.now_s()
    if real - 120.0 <= end <= real + 5.0 and sim_now > end:
        shift = sim_now - end
        start, end = start + shift, sim_now
    if start > end:
        raise bad_request(
            "Field interval.startTime is later than interval.endTime.", field="interval.start_time"
        )
    a = req.aggregation
    if a.reducer != "REDUCE_NONE" and a.aligner == "ALIGN_NONE":
        raise bad_request(
            "The cross-series reducer requires a per-series aligner other than ALIGN_NONE.",
            field="aggregation.crossSeriesReducer",
        )
    if a.aligner != "ALIGN_NONE" and a.period_s < 1:
        raise bad_request(
            "Field aggregation.alignmentPeriod had an invalid value: an aligner needs an alignment period.",
            field="aggregation.alignmentPeriod",
        )
    if a.aligner != "ALIGN_NONE" and (end - start) / a.period_s > MAX_POINTS_PER_SERIES:
        raise bad_request(
            "The request would return too many points per series.", field="aggregation.alignmentPeriod"
        )
    if not (0 <= req.page_size <= MAX_PAGE_SIZE):
        raise bad_request(f"Field pageSize had an invalid value of {req.page_size}.", field="page_size")
    if not backend.known(metric_type):
        raise ApiError(
            "NOT_FOUND",
            f'Cannot find metric(s) that match type = "{metric_type}". If a metric was created recently, '
            "it could take up to 10 minutes to become available. Please try again soon.",
        )
    lo = start - (a.period_s if a.aligner != "ALIGN_NONE" else 0.0)
    raw = [
        s
        for s in backend.raw_series(project, metric_type, lo if start < end else start - 1e-6, end)
        if pred(s)
    ]
    if a.aligner == "ALIGN_NONE":
        series = []
        for s in raw:
            pts = [(p[0], p[1], p[2]) for p in reversed(s.points) if start <= p[1] <= end or start == end]
            labels = (s.metric_labels, s.resource_type, s.resource_labels)
            series.append(OutSeries(s.metric_type, s.kind, s.value_type, *labels, s.unit, pts))
        series = [s for s in series if s.points]
    else:
        series = [o for s in raw if (o := _align(s, a, start, end)) is not None]
        if a.reducer != "REDUCE_NONE":
            series = _reduce(series, a)
    series.sort(key=lambda s: (sorted(s.resource_labels.items()), sorted(s.metric_labels.items())))
    if req.headers_only:
        for s in series:
            s.points = []
    size = req.page_size or MAX_PAGE_SIZE
    offset = 0
    fp = _fingerprint(req)
    if req.page_token:
        try:
            tok_fp, _, off = base64.urlsafe_b64decode(req.page_token.encode()).decode().partition(":")
            offset = int(off)
        except (ValueError, UnicodeDecodeError):
            tok_fp, offset = "", -1
        if tok_fp != fp or offset < 0:
            raise bad_request(
                f'Field pageToken had an invalid value of "{req.page_token}": '
                "it does not belong to this request.",
                field="page_token",
            )
    page = series[offset : offset + size]
    nxt = offset + size
    token = base64.urlsafe_b64encode(f"{fp}:{nxt}".encode()).decode() if nxt < len(series) else ""
    return page, token
