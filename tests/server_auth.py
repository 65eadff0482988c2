"""A LangGraph Server ``auth`` handler for the server tests: two on-call engineers, by bearer token.

Named in the test's langgraph.json (``"auth": {"path": ".../tests/server_auth.py:auth"}``); a
deployment writes its own (an identity provider's tokens, not a table)."""

from __future__ import annotations

from langgraph_sdk import Auth

TOKENS = {"tok-dana": "dana@example.com", "tok-eve": "eve@example.com"}

auth = Auth()


@auth.authenticate
async def authenticate(authorization: str | None) -> Auth.types.MinimalUserDict:
    token = (authorization or "").removeprefix("Bearer ").strip()
    if token not in TOKENS:
        raise Auth.exceptions.HTTPException(status_code=401, detail="not an on-call engineer")
    return {"identity": TOKENS[token]}
