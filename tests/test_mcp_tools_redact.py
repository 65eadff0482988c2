"""The redactor against the one corpus of secret shapes (``tests/secret_shapes.py``), and the
flags and values it must leave alone."""

from __future__ import annotations

import pytest

from mcp_tools.redact import redact, redact_args, redact_data, redact_spec
from tests.secret_shapes import PEM, SHAPES, Shape


@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
def test_each_shape_is_redacted_in_text(shape: Shape) -> None:
    out = redact(shape.text)
    assert shape.secret not in out
    assert "PLANT" not in out, out
    assert "REDACTED" in out


@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
def test_each_shape_is_redacted_in_data(shape: Shape) -> None:
    out = redact_data({"message": shape.text, "lines": shape.text.splitlines()})
    assert "PLANT" not in str(out)


def test_a_command_line_split_into_items() -> None:
    args = [
        "serve",
        "/m",
        "--api-key",
        "PLANTa1",
        "--hf-token=hf_PLANTabcdefghijklmnopqrstu",
        "--hf-token",
        "PLANTa2",
        "--max-num-batched-tokens",
        "8192",
        "--tokenizer",
        "/tok",
    ]
    out = redact_args(args)
    assert "PLANT" not in " ".join(out)
    assert out[-4:] == ["--max-num-batched-tokens", "8192", "--tokenizer", "/tok"]
    assert "PLANT" not in str(redact_data({"args": args}))


def test_a_spec_keeps_what_the_loop_reads_and_hides_the_rest() -> None:
    from mcp_tools.incident import ServiceSpec

    spec = ServiceSpec(
        name="svc",
        args=[
            "--model=/mnt/models/m",
            "--max-model-len=16384",
            "--max-num-batched-tokens",
            "8192",
            "--api-key",
            "PLANTspec1",
        ],
        env={
            "HF_HUB_OFFLINE": "1",
            "HF_TOKEN": "hf_PLANTspecTokenabcdefghij",
            "REDIS_URL": "redis://:PLANTr@h:1",
            "SA": PEM,
            "GEMMA_SRE_APPLY_KEY": "abc123",
        },
    )
    safe = redact_spec(spec)
    assert "PLANT" not in safe.model_dump_json()
    assert safe.args[:4] == spec.args[:4]
    assert safe.env["HF_HUB_OFFLINE"] == "1" and safe.env["GEMMA_SRE_APPLY_KEY"] == "abc123"
    assert redact_spec(safe) == safe  # redacting twice changes nothing more


@pytest.mark.parametrize(
    "text",
    [
        "--max-num-batched-tokens 8192 --tokenizer /mnt/tok",
        "GPU KV cache size: 112,000 tokens",
        "Maximum concurrency for 16384 tokens per request: 6.84x",
        "Loading weights took 12.3 seconds",
        "http://127.0.0.1:8080/health 200",
        "model=/mnt/models/gemma-4-12B-it max_model_len=16384",
        "api_key=None",
        "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    ],
)
def test_ordinary_lines_are_left_alone(text: str) -> None:
    assert redact(text) == text
