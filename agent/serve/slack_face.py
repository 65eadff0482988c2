"""The Slack app face: an approval request as a Block Kit message, and its buttons' callback.

The message is the approval request's one rendering (``agent.display.request_text``: the plan's
steps with the capacity planner's prediction, the revision diff, preflight's notes and the ranked
options) in code blocks, with an actions block: Approve (the offered plan), one "Approve option N"
per other ranked option that passed preflight, and Reject. It is posted with ``slack_sdk``'s
``WebClient.chat_postMessage`` (``base_url`` configurable: a Slack-compatible API for tests).

A button press reaches ``POST /slack/interactions`` as ``application/x-www-form-urlencoded``
``payload=<JSON>``. It is trusted only when ``slack_sdk.signature.SignatureVerifier`` accepts its
``X-Slack-Signature`` (``v0=`` HMAC-SHA256 of ``v0:{timestamp}:{body}`` with the signing secret) and
its ``X-Slack-Request-Timestamp`` is within five minutes; a signature seen before is a replay and is
refused (``agent.serve.ledger``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mcp_tools.errors import UserError

if TYPE_CHECKING:
    from graph.state import ApprovalRequest

#: Slack's limits: a section's text, a message's blocks, a button's value.
SECTION_MAX = 3000
BLOCKS_MAX = 50
ACTION_ID = "gemma_sre_decide"


def _mrkdwn(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _code_blocks(text: str, budget: int) -> list[dict[str, Any]]:
    """``text`` as ``` sections of at most SECTION_MAX characters, cut at line ends, at most ``budget``."""
    room = SECTION_MAX - 8
    chunks: list[str] = []
    cur = ""
    for line in _mrkdwn(text).splitlines():
        line = line[:room]
        if len(cur) + len(line) + 1 > room:
            chunks.append(cur)
            cur = ""
        cur += line + "\n"
    if cur:
        chunks.append(cur)
    if len(chunks) > budget:
        chunks = chunks[: budget - 1] + ["(cut: the rest is in `gemma-sre approve --help` / the report)\n"]
    return [{"type": "section", "text": {"type": "mrkdwn", "text": f"```{c.rstrip()}```"}} for c in chunks]


class ButtonValue(BaseModel):
    """What a button carries back (we wrote it; Slack signs the callback that returns it)."""

    model_config = ConfigDict(extra="forbid")

    thread: str = Field(min_length=1, max_length=200)
    decision: Literal["approve", "reject"]
    option: int | None = Field(default=None, ge=1, le=100)


def _button(text: str, value: ButtonValue, style: str | None = None) -> dict[str, Any]:
    b: dict[str, Any] = {
        "type": "button",
        "text": {"type": "plain_text", "text": text[:75]},
        "action_id": f"{ACTION_ID}:{value.decision}:{value.option or 0}",
        "value": value.model_dump_json(exclude_none=True),
    }
    if style:
        b["style"] = style
    return b


def approval_blocks(req: ApprovalRequest, *, outcome: str | None = None) -> tuple[str, list[dict[str, Any]]]:
    """(fallback text, blocks) for one approval request; ``outcome``: decided, shown instead of buttons."""
    from agent.display import request_text

    title = f"Approval needed: {req.category or 'incident'} on {req.service}"
    head = [
        {"type": "header", "text": {"type": "plain_text", "text": title[:150]}},
        {
            "type": "section",
            "text": {"type": "mrkdwn", "text": _mrkdwn(req.summary or "(no summary)")[:SECTION_MAX]},
        },
    ]
    tail: list[dict[str, Any]] = [
        {"type": "context", "elements": [{"type": "mrkdwn", "text": f"thread `{_mrkdwn(req.thread_id)}`"}]}
    ]
    if outcome is None:
        buttons = [_button("Approve", ButtonValue(thread=req.thread_id, decision="approve"), "primary")]
        for o in req.options:
            if o.ok and not o.offered:
                buttons.append(
                    _button(
                        f"Approve option {o.rank}",
                        ButtonValue(thread=req.thread_id, decision="approve", option=o.rank),
                    )
                )
        buttons = buttons[:24]
        buttons.append(_button("Reject", ButtonValue(thread=req.thread_id, decision="reject"), "danger"))
        tail.insert(0, {"type": "actions", "block_id": "gemma_sre_decision", "elements": buttons})
    else:
        tail.insert(
            0, {"type": "section", "text": {"type": "mrkdwn", "text": _mrkdwn(outcome)[:SECTION_MAX]}}
        )
    body = _code_blocks(request_text(req, width=100), BLOCKS_MAX - len(head) - len(tail))
    return title, [*head, *body, *tail]


class SlackUser(BaseModel):
    model_config = ConfigDict(extra="ignore")

    id: str = Field(min_length=1, max_length=100)
    username: str | None = None
    name: str | None = None

    @property
    def display(self) -> str:
        return (self.username or self.name or self.id)[:100]


class _Action(BaseModel):
    model_config = ConfigDict(extra="ignore")

    action_id: str = ""
    value: str = ""


class _Container(BaseModel):
    model_config = ConfigDict(extra="ignore")

    channel_id: str | None = None
    message_ts: str | None = None


class Interaction(BaseModel):
    """The parts of a ``block_actions`` interaction payload that are used."""

    model_config = ConfigDict(extra="ignore")

    type: str
    user: SlackUser
    actions: list[_Action] = Field(min_length=1)
    container: _Container = Field(default_factory=_Container)

    def button(self) -> ButtonValue:
        act = self.actions[0]
        if not act.action_id.startswith(ACTION_ID):
            raise UserError(f"action {act.action_id[:80]!r} is not one of gemma-sre's buttons")
        try:
            return ButtonValue.model_validate_json(act.value)
        except ValidationError:
            raise UserError("the button's value is not one gemma-sre wrote") from None


def parse_interaction(body: bytes) -> Interaction:
    """The form body's ``payload=`` JSON (UserError: not a block_actions payload)."""
    from urllib.parse import parse_qs

    try:
        form = parse_qs(body.decode("utf-8"), strict_parsing=True)
        raw = form["payload"][0]
        doc = json.loads(raw)
    except (UnicodeDecodeError, ValueError, KeyError, IndexError):
        raise UserError("expected application/x-www-form-urlencoded payload=<JSON>") from None
    try:
        inter = Interaction.model_validate(doc)
    except ValidationError as e:
        first = e.errors()[0]
        raise UserError(f"payload: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    if inter.type != "block_actions":
        raise UserError(f"payload type {inter.type!r}: only block_actions (button presses) are handled")
    return inter


class SlackFace:
    """Posting requests and verifying callbacks: the bot token and the signing secret stay in here.
    Without a bot token (or a channel) only callbacks are taken: nothing is posted, and a request is
    decided by a callback signed with the signing secret (``python -m agent.serve.sign_callback``)."""

    def __init__(
        self, *, bot_token: str | None, signing_secret: str, channel: str | None, base_url: str | None
    ) -> None:
        from slack_sdk import WebClient
        from slack_sdk.signature import SignatureVerifier

        self.client: WebClient | None = None
        if bot_token and channel:
            kw: dict[str, Any] = {"token": bot_token, "timeout": 15}
            if base_url:
                kw["base_url"] = base_url if base_url.endswith("/") else base_url + "/"
            self.client = WebClient(**kw)
        self.verifier = SignatureVerifier(signing_secret)
        self.channel = channel or ""

    def verified(self, body: bytes, headers: dict[str, str]) -> bool:
        """Slack's signature over this body, within the timestamp window (slack_sdk decides)."""
        try:
            return bool(self.verifier.is_valid_request(body, headers))
        except (ValueError, UnicodeDecodeError):  # a timestamp that is no number, a body not UTF-8
            return False

    def post(self, req: ApprovalRequest) -> tuple[str, str] | None:
        """Post the approval request: (channel id, message ts); None: no bot token, nothing posted."""
        if self.client is None:
            return None
        text, blocks = approval_blocks(req)
        r = self.client.chat_postMessage(channel=self.channel, text=text, blocks=blocks)
        return str(r["channel"]), str(r["ts"])

    def decided(self, channel: str, ts: str, req: ApprovalRequest, outcome: str) -> None:
        """Replace the message's buttons with what happened."""
        if self.client is None:
            return
        text, blocks = approval_blocks(req, outcome=outcome)
        self.client.chat_update(channel=channel, ts=ts, text=f"{text}: {outcome}"[:3000], blocks=blocks)

    def say(self, channel: str, ts: str | None, text: str) -> None:
        """A reply in the request's thread (or the channel)."""
        if self.client is None:
            return
        kw: dict[str, Any] = {"channel": channel, "text": _mrkdwn(text)[:3000]}
        if ts:
            kw["thread_ts"] = ts
        self.client.chat_postMessage(**kw)
