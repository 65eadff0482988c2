"""Physical log lines as the analyzers should read them: one clean record per line.

Real logs are not the neat lines a server writes. What reaches Cloud Logging (or an issue thread) has
ANSI colour left in, markdown quote markers, a ``docker compose`` service column, ``kubectl`` or
``docker logs -t`` timestamps, a tqdm progress bar glued in front of the next record, and the process
tag of whichever of several processes printed it (``(EngineCore_DP0 pid=7)``, ``(VllmWorker rank=1
pid=9)``, ``[rank0]:``, ``(RayWorkerWrapper pid=3)``). ``clean`` strips all of that and says which
process spoke and at what level, so that every analyzer matches the record's own words.

Severity is unreliable: Cloud Run labels a whole stderr stream alike, gcloud output and un-prefixed
traceback lines arrive as ``DEFAULT``. ``severity_of`` prefers the level the text itself carries
(vLLM's ``ERROR 05-01 ...``, Python logging's ``WARNING:name:``, glog's ``E0501``, uvicorn's
``INFO:``), then the shape of the text (a traceback, an exception line, a kill), and only then the
field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ANSI = re.compile(
    r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-_]|#033\[[0-9;]*[A-Za-z]"
)
#: Colour codes whose ESC byte was lost in a copy ("[1;36m(VllmWorker pid=1)[0;0m").
_BARE_SGR = re.compile(r"\[(?:\d{1,3};)*\d{1,3}m")
_CR = re.compile(r"\r(?!\n)")
_QUOTE = re.compile(r"^(?:\s{0,3}>(?: |$))+")
#: ``docker compose`` output: "vllm-1  | INFO ..." / "deepseek  | ...".
_COMPOSE = re.compile(
    r"^[A-Za-z0-9][\w.-]{0,62}\s+\|(?: |$)"
)  # one space: indentation after it is the line's
#: A leading timestamp added by kubectl --timestamps, docker logs -t, journald or a console copy.
_LEAD_TS = re.compile(
    r"^(?:\[)?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d| ?[A-Z]{3,4})?(?:\])?(?:\s|$)"
)  # one space: indentation after it is the line's
_KUBECTL_PREFIX = re.compile(r"^\[pod/[^\]]+\]\s+")
#: The BSD syslog header rsyslog and ``journalctl`` put before a unit's output: "Apr  3 17:38:57
#: langmodel52 langmodel[139935]: ".
_SYSLOG = re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ [\w.@/-]+(?:\[\d+\])?: ")
#: A tqdm bar with a record glued after it ("... 4/4 [00:02<00:00,  1.5it/s]INFO 05-01 ...").
_TQDM_GLUE = re.compile(r"^.*?\|\s*\d+/\d+\s*\[[^\]]*\](?=\S)")
#: The process that printed the line: vLLM's and Ray's "(EngineCore_DP0 pid=212)", "(RayWorkerWrapper
#: pid=5678, ip=10.0.0.3)", SkyPilot's "(task, pid=27090)" / "(head, rank=0, pid=17546)", torch's "[rank0]:".
_PROC = re.compile(
    r"^\s*(?:\((?P<proc>[A-Za-z_][\w.-]*,?(?: [\w=.-]+,?)*?\s*(?:rank=\d+,?\s*)?pid=\d+(?:, ip=[\d.]+)?)\)"
    r"|\[(?P<rank>rank\d+)\]:|\((?P<pid>pid=\d+(?:, ip=[\d.]+)?)\)"
    r"|\((?P<ray>raylet|gcs_server|dashboard)\))\s?"
)
#: vLLM's own prefix, old and new: "INFO 08-01 09:00:02 api_server.py:440] " / "ERROR 11-05 12:19:32
#: [core.py:708] ".
_VLLM = re.compile(
    r"^(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? "
    r"(?:\[[^\]]*\]|[\w./-]+:\d+\])\s?"
)
#: Other loggers: uvicorn "INFO:     ", Python logging "WARNING:root:", glog "E0501 12:00:00.123 ...".
_PYLOG = re.compile(r"^(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL):(?:\s+|[\w.]+:)")
#: A pipe-separated logger column, as FastChat's and loguru's formats print it after their timestamp:
#: "| ERROR | stderr | ...", "| WARNING  | module:func:12 - ...".
_PIPE = re.compile(
    r"^\|?\s*(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|SUCCESS|TRACE)\s*\|\s?"
    r"(?:(?:stdout|stderr)\s*\|\s?|[\w.<>]+:[\w.<>]+:\d+ - )?"
)
#: Triton Inference Server's status of a model that did not load, "UNAVAILABLE: " and the status code's
#: name ("Internal: ", "Invalid argument: "): what follows is the load's error record.
_TRITON_UNAVAILABLE = r"(?P<level>UNAVAILABLE): (?:[A-Z][a-z]{1,20}(?: [a-z]{1,20}){0,3}: )"
#: A row of its model-status table ("| vllm | 1 | UNAVAILABLE: Internal: TypeError: ... |"), the table's
#: closing bar no part of the record (the status code may be left out there)...
_TRITON_ROW = re.compile(r"^\|\s*[\w.-]{1,120}\s*\|\s*\d{1,9}\s*\|\s*" + _TRITON_UNAVAILABLE + "?")
#: ... or the status alone, as the model's readiness or a paste without the table gives it (vllm#1647:
#: "UNAVAILABLE: Internal: AssertionError: vLLM Triton backend must be configured to use decoupled ...").
_TRITON_STATUS = re.compile("^" + _TRITON_UNAVAILABLE)
#: Python logging's "%(asctime)s - %(name)s - %(levelname)s - %(message)s", its timestamp gone:
#: "- vllm.v1.engine.core_client - CRITICAL - Got fatal signal ...".
_DASHED = re.compile(r"^-?\s*[\w.]+ - (?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL) - ")
_GLOG = re.compile(r"^(?P<level>[IWEF])\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+\s+\S+:\d+\]\s?")
#: Formats that put the logger's name (and the process) before the level, their timestamp gone, as the
#: gateways and serving frameworks around vLLM print them: LiteLLM's "%(asctime)s - %(name)s:%(levelname)s:
#: %(filename)s:%(lineno)s - " (litellm/_logging.py) "- LiteLLM Proxy:ERROR: proxy_server.py:3631 - ...";
#: KServe's "%(asctime)s.%(msecs)03d %(process)s %(name)s %(levelname)s [%(filename)s:%(funcName)s():
#: %(lineno)s] " (kserve/logging.py) "1 kserve ERROR [engine_health.py:mark_failed():63] ..."; Ray Serve's
#: "%(levelname)s %(asctime)s {component} {id} -- " (ray/serve/_private/logging_utils.py) "WARNING
#: 2025-05-29 19:14:02,118 controller 4321 -- ...".
_NAME_COLON = re.compile(
    r"^-\s?[\w.]{1,60}(?: [\w.]{1,60}){0,3}:(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL):\s"
    r"(?:[\w.]{1,120}:\d{1,7} - )?"
)
_PROC_NAME = re.compile(
    r"^\d{1,7} [\w.]{1,60} (?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) \[[^\]\n]{0,200}\]\s?"
)
_SERVE = re.compile(
    r"^(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) \d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[,.]\d{1,6})?"
    r" \S{1,80} \S{1,80} -- "
)
#: Cloud Logging's severity, then the entry's RFC 3339 timestamp, then the payload, as the console's copy
#: and ``gcloud logging read --format="value(severity,timestamp,textPayload)"`` print an entry:
#: "ERROR 2024-01-10T09:30:29.874350070Z ValueError: ...".
_SEVERITY_TS = re.compile(
    r"^(?P<level>DEFAULT|DEBUG|INFO|NOTICE|WARNING|ERROR|CRITICAL|ALERT|EMERGENCY)\s+"
    r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)\s+"
)
_BRACKET_LEVEL = re.compile(r"^\[?(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\]?[\s:]")
#: Level words that are not Python logging's own: glog's letters, Triton's status.
_LEVEL_WORDS = {
    "I": "INFO",
    "W": "WARNING",
    "E": "ERROR",
    "F": "CRITICAL",
    "UNAVAILABLE": "ERROR",
    # Cloud Logging's own: DEFAULT says nothing (the text decides), the rest fold into Python's levels.
    "DEFAULT": "",
    "NOTICE": "INFO",
    "ALERT": "CRITICAL",
    "EMERGENCY": "CRITICAL",
}

#: Text that is an error whatever the field says.
_ERROR_SHAPE = re.compile(
    r"^Traceback \(most recent call last\)|^\s+File \".*\", line \d+"
    r"|^(?:[\w.]+\.)?[A-Z]\w*(?:Error|Exception)"
    r"(?::|$)|^Killed$|Segmentation fault|core dumped|^RuntimeError|^\w*Error\b|^FATAL|^panic:"
    r"|\bAssertion [`'][^\n]{1,600}?['`] failed\b"  # a C / C++ assert (glibc's words): the process aborts
    r"|\bthread '[^'\n]{0,80}' panicked at\b"  # a Rust panic
    # vLLM's multiprocessing worker, whatever level its paste kept: "Exception in worker VllmWorkerProcess
    # while processing method load_model: <the exception's message>"
    r"|\bException in worker \S{1,80} while processing method \w{1,80}",
)
_WARN_SHAPE = re.compile(r"^\s*(?:Warning|\w+Warning):|^\s*warnings\.warn\(|^W\d{4} ")


@dataclass(frozen=True, slots=True)
class Clean:
    text: str  # the record's own words: prefixes, colour and quote markers removed
    proc: str  # the process that printed it ("EngineCore_DP0 pid=7", "rank0", "" when unknown)
    level: str  # the level the text carries ("ERROR", "INFO", ...), "" when it carries none
    #: The line without the stream's decorations (colour, quote markers, a compose column, a leading
    #: timestamp) and without its process tag, before any level prefix; leading spaces kept.
    body: str = ""
    #: The printed width of the line as its terminal saw it: without colour codes and quote markers
    #: (a compose column, a leading timestamp and a process tag are printed).
    width: int = 0
    #: The same width without the stream's columns (compose, a leading timestamp): what the process
    #: printed, when the stream put its column on every line, continuations too.
    inner: int = 0
    framed: bool = False  # the stream put a column of its own (compose, a timestamp) before the line
    spaced: bool = False  # the line ended in a space (cut after a word: its rest joins with one)
    glued: bool = False  # a tqdm bar was glued in front of it (a record starts after the bar)


def _peel_columns(s: str) -> tuple[str, str, int]:
    """A line without its stream's and its process's columns, which nest ("vllm-1 | 2025-01-01T00:00:00Z
    (EngineCore pid=1) ERROR ..."): the rest, the process tag ("" when none), and the rest's length with
    the stream's columns gone but the process tag still there."""
    proc = ""
    inner = len(s)
    for _ in range(4):
        before = s
        head = s[:1]
        if head.isalnum() and "|" in s[:66]:
            m = _COMPOSE.match(s)
            if m and not _TQDM_GLUE.match(s):
                s = s[m.end() :]
                head = s[:1]
        if head.isupper() and s[3:4] == " ":
            s = _SYSLOG.sub("", s, count=1)
            head = s[:1]
        if head.isdigit() or head == "[":
            s = _LEAD_TS.sub("", s, count=1)
            if s.startswith("[pod/"):
                s = _KUBECTL_PREFIX.sub("", s, count=1)
            head = s[:1]
        if not proc:
            inner = len(s)
        if head in "([ ":
            m = _PROC.match(s)
            if m:
                proc = (m.group("proc") or m.group("rank") or m.group("pid") or m.group("ray") or "").strip()
                s = s[m.end() :]
        if s == before:
            break
    return s, proc, inner


def clean(raw: str) -> Clean:
    """One physical line to its clean record (never raises; the text may end up empty)."""
    s = raw
    if "\x1b" in s or "[0m" in s or "m(" in s or "#033[" in s:
        s = _ANSI.sub("", s)
        s = _BARE_SGR.sub("", s)
    if "\r" in s:  # a progress bar redrawn in place: the last state is what was printed last
        parts = [p for p in _CR.split(s) if p.strip()]
        s = parts[-1] if parts else ""
    tail = len(s) - len(s := s.rstrip())  # trailing spaces take columns too (a cut after a word)
    if s.lstrip().startswith(">"):
        s = _QUOTE.sub("", s)
    if s.startswith("`") and s.endswith("`") and len(s) > 2 and not s.startswith("``"):
        s = s[1:-1]  # a line pasted as markdown inline code
    level = ""
    width = len(s)  # what the terminal printed: colour takes no column, quote markers came later
    s, proc, inner = _peel_columns(s)
    body = s
    framed = inner < width
    width, inner = width + tail, inner + tail
    glued = False
    if "|" in s and "[" in s:
        m = _TQDM_GLUE.match(s)
        if m and m.end() < len(s):
            s = s[m.end() :]
            glued = True  # a progress bar, then a record of its own: its columns start after the bar
            width, inner = width - m.end(), inner - m.end()
            s, own, _ = _peel_columns(s)  # the record after the bar carries columns of its own
            proc = own or proc
    lead = s.lstrip()  # a collector's column may leave more than one space before the level
    head = lead[:1]
    for pat in (
        (_VLLM, _GLOG, _PYLOG, _DASHED, _SERVE, _SEVERITY_TS, _TRITON_STATUS)
        if head.isupper()
        else (_PIPE, _TRITON_ROW)
        if head == "|"
        else (_DASHED, _NAME_COLON)
        if head == "-" or head.islower()
        else (_PROC_NAME,)
        if head.isdigit()
        else ()
    ):
        m = pat.match(lead)
        if m:
            lv = m.group("level")
            level = _LEVEL_WORDS.get(lv, lv)
            level = "INFO" if level in ("SUCCESS", "TRACE") else level
            s = lead[m.end() :]
            if pat is _TRITON_ROW:
                s = s.rstrip().removesuffix("|")  # the table's closing bar
            body = s  # what the logger was given: its indentation is the line's
            break
    if level == "WARN":
        level = "WARNING"
    return Clean(
        text=s.strip(),
        proc=proc,
        level=level,
        body=body,
        width=width,
        inner=inner,
        framed=framed,
        spaced=tail > 0,
        glued=glued,
    )


def severity_of(c: Clean, field: str | None) -> str:
    """The record's severity: the level its text carries, else its shape, else the field."""
    return told_severity(c) or field or "DEFAULT"


def told_severity(c: Clean) -> str:
    """The severity the text itself tells, by its level or its shape ("" when it tells none)."""
    if c.level:
        return c.level
    t = c.text
    if _ERROR_SHAPE.search(t):
        return "ERROR"
    m = _BRACKET_LEVEL.match(t)
    if m:
        lv = m.group("level")
        return "WARNING" if lv == "WARN" else ("CRITICAL" if lv == "FATAL" else lv)
    if _WARN_SHAPE.search(t):
        return "WARNING"
    return ""


#: A line that starts something of its own: a traceback, a frame, code, an exception, a table row, a
#: Python warning ("/usr/lib/python3/x.py:63: FutureWarning: ...", the warnings module's own header).
_OWN_START = re.compile(
    r"^(?:Traceback|\s{2,}|\t|File \"|During handling|The above exception|/\S+\.py:\d+: "
    r"|[\w.]+(?:Error|Exception|Warning)\b|(?:Error|Exception|Warning):"
    r"|\[|\(|\{|-{3,}|={3,}|\d{4}[-/]\d\d[-/]\d\d|[A-Z][A-Z_]+:|Killed$|Segmentation)"
)
#: A record that ends where it says so: an access line's status.
_WHOLE = re.compile(r"HTTP/\d(?:\.\d)?\" \d{3}(?: [A-Z][\w ]*)?$")
#: A physical line this long may have been cut by a terminal or a console copy.
WRAP_MIN_CHARS = 60


def continues(prev: Clean, cur: Clean) -> bool:
    """Is ``cur`` the hard-wrapped rest of the record on the line before it?

    Decided on the words as the terminal printed them: the stream's own columns (a quote marker, a
    compose column, a collector's timestamp) are on every physical line, so they say nothing. Only a
    line with no level and no process tag of its own (or the same process's, as Ray repeats it), that
    does not start a traceback, frame, code line or table row, after a long line."""
    if cur.level or cur.glued or _width(prev, cur) < WRAP_MIN_CHARS or not cur.text:
        return False
    if cur.proc and cur.proc != prev.proc:
        return False
    if "\n" in prev.body or "\n" in cur.body or prev.body.rstrip()[-1:] in (".", "!", "?", ";", "}"):
        return False  # a whole record per entry, or one that ended its sentence
    if _WHOLE.search(prev.body) and not cut_at_width(prev, cur):
        return False  # an access line is whole: what follows is another process's record
    body = cur.body.lstrip(" ") if cur.body.startswith(" ") and not cur.body.startswith("  ") else cur.body
    if _OWN_START.match(body) is not None:
        return False
    # A cut falls mid-word or mid-phrase: the rest starts lower-case, with a digit or punctuation, or
    # the line before is exactly as long as a terminal's width.
    return not body[:1].isupper() or cut_at_width(prev, cur)


def _width(prev: Clean, cur: Clean) -> int:
    # A rest with the stream's column was cut before the stream added it (the process printed it so);
    # a rest without was cut by the terminal that showed the stream.
    if cur.proc:  # the process's tag on the rest too: it was cut before the tag was put on
        return len(prev.body)
    return prev.inner if cur.framed else prev.width


def cut_at_width(prev: Clean, cur: Clean) -> bool:
    """``prev`` was cut by a terminal at its width (mid-word: ``cur`` joins it without a space)."""
    return _width(prev, cur) in _TERMINAL_WIDTHS


_TERMINAL_WIDTHS = frozenset({80, 100, 120, 132, 160, 200})
