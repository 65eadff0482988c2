"""A press of an approval message's button, signed as Slack signs it: try ``gemma-sre serve``'s Slack
face without a Slack workspace.

    GEMMA_SRE_SLACK_SIGNING_SECRET=... python -m agent.serve.sign_callback THREAD \\
        [--reject | --option N] [--user U0LOCAL] [--url http://127.0.0.1:8780/slack/interactions] [--curl]

It builds the ``block_actions`` payload Slack sends for a press of the button (the button's
``action_id`` and ``value`` as ``agent.serve.slack_face`` writes them), signs it with ``slack_sdk``'s
``SignatureVerifier.generate_signature`` (the code that verifies it in the server), and POSTs it to
the server's interactivity URL; ``--curl`` prints the equivalent curl command instead. The signing
secret comes from the environment, never the command line (it would be in the shell's history).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any
from urllib.parse import urlencode

from mcp_tools.errors import UserError


def callback_body(thread: str, decision: str, *, option: int | None = None, user: str = "U0LOCAL") -> str:
    """The form body of a ``block_actions`` interaction: ``user`` pressed the button deciding ``thread``."""
    from pydantic import ValidationError

    from agent.serve.slack_face import ButtonValue, _button

    try:
        value = ButtonValue(thread=thread, decision=decision, option=option)  # type: ignore[arg-type]
    except ValidationError as e:
        first = e.errors()[0]
        raise UserError(f"{'.'.join(map(str, first['loc'])) or 'button'}: {first['msg']}") from None
    button = _button(decision, value)
    payload: dict[str, Any] = {
        "type": "block_actions",
        "user": {"id": user, "username": user, "name": user},
        "container": {"type": "message"},
        "actions": [
            {
                "type": "button",
                "action_id": button["action_id"],
                "block_id": "gemma_sre_decision",
                "value": button["value"],
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }
    return urlencode({"payload": json.dumps(payload)})


def signed_headers(secret: str, body: str, *, timestamp: int | None = None) -> dict[str, str]:
    """The headers Slack sends with ``body``: its request timestamp and ``v0=`` signature."""
    from slack_sdk.signature import SignatureVerifier

    stamp = str(int(time.time()) if timestamp is None else timestamp)
    signature = SignatureVerifier(secret).generate_signature(timestamp=stamp, body=body)
    assert signature is not None
    return {
        "content-type": "application/x-www-form-urlencoded",
        "x-slack-request-timestamp": stamp,
        "x-slack-signature": signature,
    }


def _secret() -> str:
    from agent.serve.settings import ServeSettings

    try:
        s = ServeSettings()
    except ValueError:
        raise UserError("GEMMA_SRE_SLACK_SIGNING_SECRET: not a usable secret") from None
    if s.slack_signing_secret is None:
        raise UserError("GEMMA_SRE_SLACK_SIGNING_SECRET is not set (the secret the server verifies with)")
    return s.slack_signing_secret.get_secret_value()


def main(argv: list[str] | None = None) -> int:
    import shlex

    p = argparse.ArgumentParser(
        prog="python -m agent.serve.sign_callback", description=__doc__.split("\n")[0]
    )
    p.add_argument("thread", help="the thread waiting for a decision (GET /investigations shows it)")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--reject", action="store_true", help="press Reject (default: Approve)")
    how.add_argument("--option", type=int, help="press 'Approve option N' (a ranked option)")
    p.add_argument("--user", default="U0LOCAL", help="the Slack user id recorded as the approver")
    p.add_argument("--url", default="http://127.0.0.1:8780/slack/interactions", help="the interactivity URL")
    p.add_argument("--curl", action="store_true", help="print a curl command instead of posting")
    args = p.parse_args(argv)
    try:
        if args.option is not None and not 1 <= args.option <= 100:
            raise UserError(f"--option {args.option}: the ranked options count from 1 (to 100)")
        body = callback_body(
            args.thread, "reject" if args.reject else "approve", option=args.option, user=args.user
        )
        headers = signed_headers(_secret(), body)
    except UserError as e:
        print(f"error: {e}".splitlines()[0], file=sys.stderr)
        return 2
    if args.curl:
        parts = ["curl", "-sS", "-X", "POST", args.url]
        for k, v in headers.items():
            parts += ["-H", f"{k}: {v}"]
        print(" ".join(shlex.quote(x) for x in [*parts, "--data-raw", body]))
        return 0
    import httpx

    try:
        r = httpx.post(args.url, content=body, headers=headers, timeout=30)
    except httpx.HTTPError as e:
        print(f"error: {args.url}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    print(f"HTTP {r.status_code}{': ' + r.text[:300] if r.text else ''}")
    return 0 if r.is_success else 1


if __name__ == "__main__":
    sys.exit(main())
