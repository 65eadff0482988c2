"""Cloud Logging v2 REST: ``POST /v2/entries:list`` (what google-cloud-logging's JSON API calls)."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from sandbox.cloudlogging.model import LogStore
from sandbox.errors import bad_request


async def list_entries(store: LogStore, body: dict[str, Any]) -> Response:
    names = body.get("resourceNames", body.get("resource_names"))
    if isinstance(names, str):
        names = [names]
    if names is None:
        names = []
    if not isinstance(names, list):
        raise bad_request("resourceNames must be a list of strings", "resource_names")
    filt = body.get("filter")
    if filt is not None and not isinstance(filt, str):
        raise bad_request("filter must be a string", "filter")
    order = body.get("orderBy", body.get("order_by"))
    if order is not None and not isinstance(order, str):
        raise bad_request("orderBy must be a string", "order_by")
    size = body.get("pageSize", body.get("page_size"))
    if size is not None:
        try:
            size = int(size)
        except (TypeError, ValueError):
            raise bad_request(f"pageSize must be an integer, not {size!r}", "page_size") from None
    token = body.get("pageToken", body.get("page_token"))
    if token is not None and not isinstance(token, str):
        raise bad_request("pageToken must be a string", "page_token")
    body_bytes = store.list_entries_json(
        resource_names=names, filter_=filt, order_by=order, page_size=size, page_token=token
    )
    return Response(body_bytes, media_type="application/json")


__all__ = ["list_entries", "Request"]
