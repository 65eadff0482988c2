"""``gemma-sre serve``'s own settings (``GEMMA_SRE_*``), apart from the shared ones: its secrets are
read here and handed only to the parts that use them (never printed, logged or stored)."""

from __future__ import annotations

from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from mcp_tools.errors import UserError


class ServeSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="GEMMA_SRE_", extra="ignore")

    serve_token: SecretStr | None = None  # the bearer token every request but Slack's must carry
    slack_signing_secret: SecretStr | None = None  # the Slack app's signing secret
    slack_bot_token: SecretStr | None = None  # xoxb-...: chat:write
    slack_channel: str | None = Field(default=None, max_length=200)  # where approval requests go
    slack_api_url: str | None = None  # another Slack-compatible API (default https://slack.com/api/)

    @field_validator("serve_token", "slack_signing_secret", "slack_bot_token")
    @classmethod
    def _not_blank(cls, v: SecretStr | None) -> SecretStr | None:
        if v is not None and not v.get_secret_value().strip():
            raise ValueError("a secret of only whitespace is no secret")
        return v

    @field_validator("slack_api_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        from mcp_tools.settings import check_http_url

        if not v:
            return None
        try:
            return check_http_url(v, "value")
        except UserError as e:
            raise ValueError(str(e).removeprefix("value: ")) from None

    def check(self) -> None:
        if self.serve_token is None:
            raise UserError(
                "GEMMA_SRE_SERVE_TOKEN is not set: gemma-sre serve always authenticates its callers "
                "(alert senders send 'Authorization: Bearer <token>')"
            )
        post = {
            "GEMMA_SRE_SLACK_BOT_TOKEN": self.slack_bot_token,
            "GEMMA_SRE_SLACK_CHANNEL": self.slack_channel,
        }
        given = [k for k, v in post.items() if v]
        if given and self.slack_signing_secret is None:
            raise UserError(
                f"Slack is half configured: {given[0]} is set but GEMMA_SRE_SLACK_SIGNING_SECRET is not "
                "(the buttons' callbacks could not be verified)"
            )
        if given and len(given) < len(post):
            missing = ", ".join(k for k, v in post.items() if not v)
            raise UserError(
                f"Slack is half configured: {missing} not set (set the bot token and the channel)"
            )


def serve_settings() -> ServeSettings:
    try:
        s = ServeSettings()
    except ValidationError as e:
        first = e.errors()[0]
        field = str(first["loc"][0]) if first.get("loc") else ""
        msg = str(first.get("msg", "")).removeprefix("Value error, ")
        raise UserError(f"GEMMA_SRE_{field.upper()}: {msg}") from None
    s.check()
    return s
