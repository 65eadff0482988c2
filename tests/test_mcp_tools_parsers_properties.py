"""Property-based suites (hypothesis) for the parsers of outside text: the sandbox's Cloud Logging
filter parser and the vLLM flag parser. Malformed, huge and adversarial input gets one clear error
of the parser's own type, in bounded time (hypothesis deadlines) and bounded memory."""

from __future__ import annotations

import resource

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_tools.capacity.flags import VllmFlags, parse_vllm_args
from mcp_tools.errors import UserError
from sandbox.cloudlogging.filter import FilterError, compile_filter

_FILTER_WORDS = st.sampled_from(
    [
        "severity",
        ">=",
        "<",
        "=",
        ":",
        "!=",
        "=~",
        "ERROR",
        "AND",
        "OR",
        "NOT",
        "-",
        "(",
        ")",
        '"',
        "\\",
        "resource.type",
        '"cloud_run_revision"',
        "timestamp",
        '"2026-01-01T00:00:00Z"',
        "textPayload",
        "jsonPayload.message",
        'labels."x"',
        "nan",
        "1e999",
        "*",
        "\x00",
        "é",
    ]
)
_FILTERS = st.one_of(
    st.text(max_size=300),
    st.lists(_FILTER_WORDS, max_size=60).map(" ".join),
    st.integers(1, 3000).map(lambda n: "(" * n + "severity>=ERROR" + ")" * n),
    st.integers(1, 3000).map(lambda n: "NOT " * n + "severity>=ERROR"),
    st.integers(1, 2000).map(lambda n: " AND ".join(["severity>=ERROR"] * n)),
)


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(src=_FILTERS)
def test_filter_parser_answers_or_refuses_in_one_line(src: str) -> None:
    before = _rss_mib()
    try:
        pred = compile_filter(src)
    except FilterError as e:
        assert str(e) and "\n" not in str(e)
    else:
        pred({"severity": "ERROR", "textPayload": "x", "timestamp": "2026-01-01T00:00:00Z"})
    assert _rss_mib() - before < 200


_FLAG_NAMES = st.sampled_from(
    [
        "--max-model-len",
        "--gpu-memory-utilization",
        "--kv-cache-dtype",
        "--quantization",
        "--dtype",
        "--max-num-seqs",
        "--max-num-batched-tokens",
        "--tensor-parallel-size",
        "--block-size",
        "--enforce-eager",
        "--model",
        "--unknown-flag",
        "--",
        "-x",
    ]
)
_FLAG_VALUES = st.one_of(
    st.sampled_from(
        ["nan", "inf", "-inf", "1e400", "9e999.5", "32k", "1M", "0", "-1", "1.5", "", "auto", "fp8"]
    ),
    st.integers(-(10**40), 10**40).map(str),
    st.floats().map(repr),
    st.text(max_size=20),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    args=st.lists(
        st.one_of(_FLAG_NAMES, _FLAG_VALUES, st.tuples(_FLAG_NAMES, _FLAG_VALUES).map("=".join)), max_size=12
    ),
    as_text=st.booleans(),
)
def test_flag_parser_answers_or_refuses_in_one_line(args: list[str], as_text: bool) -> None:
    try:
        flags = parse_vllm_args(" ".join(args) if as_text else args)
    except UserError as e:
        assert str(e) and "\n" not in str(e)
        return
    assert isinstance(flags, VllmFlags)
    assert 0 < flags.gpu_memory_utilization <= 1
    for v in (flags.max_model_len, flags.max_num_seqs, flags.max_num_batched_tokens):
        assert v is None or 0 < v < 2**31
