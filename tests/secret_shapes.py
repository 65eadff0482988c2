"""The one corpus of secret shapes: every way a credential has been seen in a log line, a command line,
an env var or a printed config. ``mcp_tools.redact`` must hide each ``secret``; the planted-secret
loop test plants them in a service's env, args and log lines and looks for every one afterwards.

Each secret holds a unique ``PLANT`` marker, so a grep over any output finds a leaked copy exactly.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    name: str
    text: str  # a line as it appears (log line, printed config, header)
    secret: str  # what must not survive redaction


def _s(name: str, template: str, secret: str) -> Shape:
    return Shape(name, template.format(s=secret), secret)


PEM_BODY = (
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQDPLANTpemBODYa1b2c3",
    "PLANTpemLINE2xQ9m3n4b5v6c7x8z9a0s1d2f3g4h5j6k7l8q9w0e1r2t3y4u5i6o7p8",
    "PLANTpemLINE3Zx+/Qw1Er2Ty3Ui4Op5As6Df7Gh8Jk9Lz0Xc1Vb2Nm3Qa4Ws5Ed6Rf7==",
)
PEM = "-----BEGIN PRIVATE KEY-----\n" + "\n".join(PEM_BODY) + "\n-----END PRIVATE KEY-----\n"

SHAPES: list[Shape] = [
    _s("hf token in text", "Using Hugging Face token {s} to download", "hf_PLANThfTextA1b2C3d4E5f6G7h8"),
    _s("HF_TOKEN env print", "HF_TOKEN={s}", "hf_PLANThfEnvB1c2D3e4F5g6H7i8J9"),
    _s("bearer header", "Authorization: Bearer {s}", "PLANTbearerHdr0123456789abcdef"),
    _s("bare bearer", "retrying with bearer {s}", "PLANTbareBearer0123456789abcd"),
    _s("basic header", 'headers={{"authorization": "Basic {s}"}}', "UExBTlRiYXNpYzp1c2VyOnB3ZA=="),
    _s("api_key=", "openai client configured api_key={s} base_url=http://x", "PLANTapiKeyEq0123456789"),
    _s("apiKey json", '{{"apiKey": "{s}", "model": "m"}}', "PLANTapiKeyJson0123456789"),
    _s("--api-key VALUE", "args: vllm serve /mnt/models/m --api-key {s} --port 8080", "PLANTapiKeySp01234"),
    _s("--api-key=VALUE", "vllm serve /mnt/models/m --api-key={s} --port=8080", "PLANTapiKeyEqFlag0123"),
    _s("--hf-token=", "vllm serve m --hf-token={s}", "hf_PLANThfFlagC1d2E3f4G5h6I7j8K9"),
    _s("--hf-token VALUE", "vllm serve m --hf-token {s} --max-model-len 4096", "PLANThfFlagSp0123456"),
    _s("redis empty user", "connecting to redis://:{s}@cache.internal:6379/0", "PLANTredisPw0123"),
    _s("postgres user:pw", "DATABASE_URL=postgresql://svc:{s}@db.internal:5432/app", "PLANTpgPw0123"),
    _s("amqp user:pw", "broker amqp://guest:{s}@mq:5672//", "PLANTamqpPw0123"),
    _s("PEM block", "service account key:\n{s}", PEM.strip()),
    _s("PEM body line 1", "{s}", PEM_BODY[0]),
    _s("PEM body line 2", "{s}", PEM_BODY[1]),
    _s("PEM body line 3", "{s}", PEM_BODY[2]),
    _s(
        "PEM in service-account JSON",
        '{{"type": "service_account", "private_key": "{s}"}}',
        PEM.replace("\n", "\\n").rstrip("\\n"),
    ),
    _s(
        "private_key_id",
        '{{"type": "service_account", "private_key_id": "{s}"}}',
        "PLANTpkid0123456789abcdef",
    ),
    _s(
        "vLLM Namespace api_key list",
        "INFO 05-29 19:07:48 api_server.py:912] args: Namespace(host=None, port=8080, "
        "api_key=['{s}'], model='/mnt/models/m', max_model_len=16384)",
        "PLANTnsApiKey0123456",
    ),
    _s(
        "vLLM non-default args dict",
        "INFO non-default args: {{'model': '/mnt/models/m', 'api_key': ['{s}'], 'max_model_len': 16384}}",
        "PLANTnonDefault0123",
    ),
    _s("sk- key", "OPENAI_API_BASE set; key {s}", "sk-PLANTskKey0123456789abcdefgh"),
    _s("AWS key id", "aws: using access key {s}", "AKIAPLANTAWSKEY01234"),
    _s("AWS secret", "aws_secret_access_key = {s}", "PLANTawsSecret0123456789abcdefghijklmnop"),
    _s("password yaml", "password: {s}", "PLANTpwYaml0123"),
    _s("db_password json", '{{"db_password": "{s}"}}', "PLANTdbPwJson0123"),
    _s("token query", "GET /v1/models?token={s} 200", "PLANTtokenQuery0123"),
    _s("google api key", "maps key {s}", "AIzaPLANTgoogleKey0123456789abcdefghijk"),
    _s("oauth token", "access token {s}", "ya29.PLANToauthToken0123456789"),
    _s("github token", "clone with {s}", "ghp_PLANTgithub0123456789abcdefghijklmn"),
    _s("jwt", "id token {s}", "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJQTEFOVCJ9.PLANTjwtSig0123456789"),
    _s("client_secret", "oauth client_secret={s}", "PLANTclientSecret0123"),
]
