"""Webhook notifications of watch-mode incidents, in the Slack incoming-webhook format.

The payload is ``{"text": ..., "blocks": [...]}`` (``text`` is the fallback Slack shows in
notifications; ``blocks`` are Block Kit ``header`` / ``section`` / ``context`` blocks), which Slack,
Mattermost, Google Chat-style relays and most chat bridges accept. Delivery is a POST through httpx
with a timeout and a bounded number of retries on connection errors, 429 and 5xx (honouring
``Retry-After``). A webhook URL carries its secret in the path, so only its host is ever logged.
"""

from __future__ import annotations

import logging
import time
from typing import Any
from urllib.parse import urlsplit

import httpx
from pydantic import BaseModel

from agent.incidents_tracker import IncidentEvent

log = logging.getLogger(__name__)

_ICON = {"new": ":rotating_light:", "escalated": ":arrow_double_up:", "resolved": ":white_check_mark:"}
_TITLE = {"new": "New incident", "escalated": "Incident escalated", "resolved": "Incident resolved"}


def _mrkdwn(text: str) -> str:
    """Slack's three control characters, escaped."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def slack_payload(event: IncidentEvent, *, approve_hint: str | None = None) -> dict[str, Any]:
    """The Slack-compatible message for one incident event."""
    inc = event.incident
    title = f"{_TITLE[event.kind]}: {inc.category} on {inc.service}"
    text = f"{title} ({event.reason})"
    fields = [
        {"type": "mrkdwn", "text": f"*Category*\n{_mrkdwn(inc.category)}"},
        {"type": "mrkdwn", "text": f"*Service*\n{_mrkdwn(inc.service)}"},
        {"type": "mrkdwn", "text": f"*Confidence*\n{inc.confidence:.2f}"},
        {"type": "mrkdwn", "text": f"*First seen*\n{inc.first_seen}"},
    ]
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": f"{_ICON[event.kind]} {title}"[:150]}},
        {"type": "section", "text": {"type": "mrkdwn", "text": _mrkdwn(inc.summary or event.reason)[:3000]}},
        {"type": "section", "fields": fields},
    ]
    if inc.evidence and event.kind != "resolved":
        quoted = "\n".join(_mrkdwn(e)[:500] for e in inc.evidence[:3])
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": f"```{quoted}```"[:3000]}})
    context = [f"{event.kind}: {event.reason}", f"fingerprint {inc.fingerprint}"]
    if inc.thread_id:
        context.append(f"thread {inc.thread_id}")
    if inc.outcome:
        context.append(f"outcome {inc.outcome}")
    if approve_hint:
        context.append(approve_hint)
    blocks.append(
        {"type": "context", "elements": [{"type": "mrkdwn", "text": _mrkdwn(" · ".join(context))[:3000]}]}
    )
    return {"text": text, "blocks": blocks}


class DeliveryResult(BaseModel):
    ok: bool
    attempts: int
    status: int | None = None
    error: str | None = None


def _host(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or '?'}" + (f":{parts.port}" if parts.port else "")


def send_webhook(
    url: str,
    payload: dict[str, Any],
    *,
    timeout_s: float = 10.0,
    retries: int = 3,
    backoff_s: float = 0.5,
    client: httpx.Client | None = None,
) -> DeliveryResult:
    """POST ``payload`` as JSON. Never raises for a delivery failure: the result says what happened."""
    if not url.startswith(("http://", "https://")):
        return DeliveryResult(ok=False, attempts=0, error="webhook URL must start with http:// or https://")
    own = client is None
    c = client or httpx.Client(timeout=timeout_s)
    attempts = 0
    last_status: int | None = None
    last_error: str | None = None
    try:
        while attempts <= retries:
            attempts += 1
            delay = backoff_s * (2 ** (attempts - 1))
            try:
                r = c.post(url, json=payload, timeout=timeout_s)
                last_status = r.status_code
                if r.status_code < 300:
                    return DeliveryResult(ok=True, attempts=attempts, status=r.status_code)
                last_error = f"HTTP {r.status_code}"
                if r.status_code != 429 and r.status_code < 500:
                    break  # the receiver refused it: retrying will not help
                ra = r.headers.get("retry-after")
                if ra and ra.isdigit():
                    delay = min(float(ra), 30.0)
            except httpx.HTTPError as e:
                last_error = f"{type(e).__name__}: {e}"
                last_status = None
            if attempts <= retries:
                log.info("webhook %s: %s; retrying in %.1fs", _host(url), last_error, delay)
                time.sleep(delay)
    finally:
        if own:
            c.close()
    log.warning("webhook %s: not delivered after %d attempt(s): %s", _host(url), attempts, last_error)
    return DeliveryResult(ok=False, attempts=attempts, status=last_status, error=last_error)
