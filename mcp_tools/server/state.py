"""The state the tools share: settings, lazily built Cloud Run and Cloud Logging clients, confirmation
tokens, and where the vLLM endpoint (and a model to analyse with) is."""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Literal, TypeVar

from mcp_tools.errors import UserError
from mcp_tools.server.confirm import DEFAULT_CONFIRM_TTL_S, ConfirmationStore
from mcp_tools.server.core import SharedResult
from mcp_tools.service_models import ServiceInfo
from mcp_tools.settings import Settings

if TYPE_CHECKING:
    from mcp_tools.cloudlogging import CloudLogging
    from mcp_tools.cloudrun import CloudRun
    from mcp_tools.endpoint import VllmEndpoint


_C = TypeVar("_C")


class EndpointResult(SharedResult):
    service: str | None = None
    url: str
    source: Literal["VLLM_BASE_URL", "cloud_run"]


class ServerState:
    """What the tools share: settings, lazily built clients, confirmation tokens."""

    def __init__(self, settings: Settings, *, confirm_ttl_s: float = DEFAULT_CONFIRM_TTL_S) -> None:
        self.settings = settings
        self.policy = settings.policy
        self.confirmations = ConfirmationStore(settings.state_dir, confirm_ttl_s)
        self._clients: dict[type, object] = {}
        self._lock = threading.Lock()

    def _client(self, cls: type[_C]) -> _C:
        """The one ``cls(settings)`` client, built on first use."""
        with self._lock:
            client = self._clients.get(cls)
            if client is None:
                client = self._clients[cls] = cls(self.settings)  # type: ignore[call-arg]
            return client  # type: ignore[return-value]

    @property
    def cloudrun(self) -> CloudRun:
        from mcp_tools.cloudrun import CloudRun

        return self._client(CloudRun)

    @property
    def cloudlogging(self) -> CloudLogging:
        from mcp_tools.cloudlogging import CloudLogging

        return self._client(CloudLogging)

    def service_name(self, given: str | None) -> str:
        from mcp_tools.names import validate_service_name

        name = (given or "").strip() or self.settings.service
        if not name:
            raise UserError("no service named: pass service_name, or set GEMMA_SRE_SERVICE")
        return validate_service_name(name)

    async def get_service(self, name: str, *, with_revisions: bool = False) -> ServiceInfo:
        return await asyncio.to_thread(self.cloudrun.get_service, name, with_revisions=with_revisions)

    def uses_base_url(self, service_name: str | None) -> bool:
        """The one rule for which endpoint a tool talks to: the named service's URL, else
        VLLM_BASE_URL, else GEMMA_SRE_SERVICE's URL."""
        return not (service_name or "").strip() and bool(self.settings.vllm_base_url)

    async def endpoint_for(self, service_name: str | None) -> tuple[VllmEndpoint, EndpointResult]:
        """The vLLM endpoint, by ``uses_base_url``'s rule."""
        from mcp_tools.endpoint import VllmEndpoint

        if self.uses_base_url(service_name):
            url = str(self.settings.vllm_base_url)  # set: uses_base_url says so
            info = EndpointResult(service=None, url=url, source="VLLM_BASE_URL")
        else:
            name = self.service_name(service_name)
            svc = await self.get_service(name)
            if not svc.uri:
                raise UserError(f"service {name!r} has no URL yet (it has never become Ready)")
            info = EndpointResult(service=name, url=svc.uri, source="cloud_run")
        return VllmEndpoint(info.url, timeout_s=self.settings.http_timeout_s), info

    async def model_endpoints(self, service_name: str | None) -> list[VllmEndpoint]:
        """Endpoints that can answer an analysis prompt, in the order to try them: the model URL (else
        the service's own endpoint), then the fallback (``mcp_tools.model_endpoint.model_urls``)."""
        from mcp_tools.endpoint import VllmEndpoint
        from mcp_tools.model_endpoint import model_urls

        primary = self.settings.model_url
        if not primary:
            try:
                primary = (await self.endpoint_for(service_name))[1].url
            except UserError:
                primary = None
        return [
            VllmEndpoint(u, api_key=self.settings.model_api_key, timeout_s=self.settings.model_timeout_s)
            for u in model_urls(self.settings, primary=primary, monitored=False)
        ]
