# ruff: noqa: E501  (credential samples are quoted whole)
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
        "(APIServer pid=1) INFO 05-29 19:10:02 [kv_cache_utils.py:1087] GPU KV cache size: 26,944 tokens",
        "params: SamplingParams(n=1, temperature=0.7, max_tokens=512), prompt_token_ids: None",
        "non-default args: {'api_key': None, 'tokenizer': '/mnt/models/gemma'}",
        "Avg prompt throughput: 12.0 tokens/s",
    ],
)
def test_ordinary_lines_are_left_alone(text: str) -> None:
    assert redact(text) == text


# Realistic credential shapes (all fake): each must disappear, the line around it must stay readable.
SECRETS = [
    ("Authorization: Bearer ya29.a0AfB_byC3xV9kLmN0pQrStUvWxYz-1234567890abcdef", "ya29.a0AfB_"),
    ('headers={"authorization": "Bearer sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"}', "sk-live-4f9a"),
    ("export HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "hf_AbCdEf"),
    ("huggingface_hub login with token hf_ZyXwVuTsRqPoNmLkJiHgFeDcBa9876543210 ok", "hf_ZyXw"),
    (
        "GET https://generativelanguage.googleapis.com/v1/models?key=AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q",
        "AIzaSy",
    ),
    ("access_token: ya29.c.b0Aaekm1KZ3example-oauth-access-token_value", "ya29.c.b0"),
    (
        "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----",
        "MIIEvQ",
    ),
    ('{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----\\nMIIEvgIBADAN', "MIIEvgIB"),
    ("db connect password=Tr0ub4dor&3 host=10.0.0.5", "Tr0ub4dor"),
    ("GEMMA_SRE_MCP_TOKEN=9f86d081884c7d659a2feaa0c55ad015 starting", "9f86d08188"),
    ("client_secret: 'GOCSPX-abcdefghijklmnop1234'", "GOCSPX"),
    (
        "jwt=eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJpc3MiOiJhY2NvdW50cy5nb29nbGUuY29tIn0.c2lnbmF0dXJlLXZhbHVl",
        "eyJpc3Mi",
    ),
    ("AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI"),
    ("pulling from https://deploy:glpat-Xy12Ab34Cd56@registry.example.com/v2/", "glpat-Xy12"),
]


@pytest.mark.parametrize(("line", "secret"), SECRETS)
def test_redact_removes_secret(line: str, secret: str) -> None:
    out = redact(line)
    assert secret not in out
    assert "[REDACTED" in out


def test_redact_args() -> None:
    args = [
        "serve",
        "/mnt/models/gemma",
        "--api-key",
        "s3cr3t-value",
        "--hf-token=hf_AbCdEfGhIjKlMnOpQrStUvWxYz01",
        "--port",
        "8080",
    ]
    out = redact_args(args)
    assert out[:2] == ["serve", "/mnt/models/gemma"] and out[-2:] == ["--port", "8080"]
    assert "s3cr3t-value" not in " ".join(out) and "hf_AbCd" not in " ".join(out)
    assert out[2] == "--api-key" and out[3] == "[REDACTED]"


def test_redacted_json_still_parses() -> None:
    """A secret inside serialized JSON (a service's env, a report) is hidden and the JSON stays valid."""
    import json

    doc = {
        "env": {"HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz123456", "PLAIN": "1"},
        "auth": "Bearer abc.def.ghi",
        "api_key": "k-1234567890",
        "nested": [{"password": "hunter2"}],
    }
    out = redact(json.dumps(doc))
    back = json.loads(out)
    assert back["env"]["PLAIN"] == "1"
    assert "hf_abcdefghijklmnopqrstuvwxyz123456" not in out
    assert "hunter2" not in out and "k-1234567890" not in out and "abc.def.ghi" not in out
    assert back["nested"][0]["password"] == "[REDACTED]"
    assert redact("HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyz123456") == "HF_TOKEN=[REDACTED:hf_token]"


def test_redact_data_hides_secret_keys_and_env_pairs_but_keeps_what_it_is_told() -> None:
    doc = {
        "env": {"HF_TOKEN": "plain-value-without-a-known-shape", "LOG_LEVEL": "debug"},
        "containers": [
            {"env": [{"name": "DB_PASSWORD", "value": "hunter2"}, {"name": "PORT", "value": "8080"}]}
        ],
        "note": "Authorization: Bearer abcdefghijklmnop",
        "max_tokens": 512,
        "confirmation_token": "cf-123",
    }
    out = redact_data(doc, frozenset({"confirmation_token"}))
    assert out["env"] == {"HF_TOKEN": "[REDACTED]", "LOG_LEVEL": "debug"}
    assert out["containers"][0]["env"] == [
        {"name": "DB_PASSWORD", "value": "[REDACTED]"},
        {"name": "PORT", "value": "8080"},
    ]
    assert "abcdefghijklmnop" not in out["note"]
    assert out["max_tokens"] == 512 and out["confirmation_token"] == "cf-123"
