"""The loop's fixed steps reach the outside world only through here, and only through ``mcp_tools``.

One ``World`` per node run, built from the run's ``Configuration``: the Cloud Run client, the
Cloud Logging reader and the vLLM endpoint client, each with the configuration's endpoints and
credentials. Keeping this seam in one module means the nodes read as the loop, not as client code.

Retries: each Google call is tried ``cfg.retries`` times by ``mcp_tools.google_api`` (once, not again
here); the vLLM endpoint's reads are retried the same way through ``World.retrying``.

Deadline: a ``World`` built with the cycle's deadline (``World(cfg, deadline=cfg.deadline())``, as
observe does) gives every call, Google's and the endpoint's, a timeout of at most what is left of it
and starts none past it (``google_api.DeadlineExceeded``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from graph.config import Configuration
from mcp_tools.google_api import READ, CallPolicy, Deadline, retrying
from mcp_tools.incident import LogLine, ServiceSpec

T = TypeVar("T")


class World:
    def __init__(self, cfg: Configuration, *, deadline: Deadline | None = None) -> None:
        self.cfg = cfg
        self.settings = cfg.settings()
        self.deadline = deadline
        self.policy: CallPolicy = READ.with_(
            attempts=cfg.retries,
            base_delay_s=cfg.retry_base_s,
            timeout_s=self.settings.http_timeout_s,
            deadline=deadline,
        )
        self._cloudrun: Any = None

    def retrying(self, fn: Callable[[], T], what: str) -> T:
        """``fn`` (a read of the vLLM endpoint) tried as a Google read is: ``cfg.retries`` times."""
        return retrying(fn, what=what, policy=self.policy, retry_on=(Exception,))

    @property
    def cloudrun(self) -> Any:
        if self._cloudrun is None:
            from mcp_tools.cloudrun import CloudRun

            self._cloudrun = CloudRun(self.settings, policy=self.policy)
        return self._cloudrun

    # -- Cloud Run --

    def get_service(self, name: str) -> Any:
        return self.cloudrun.get_service(name)

    def list_revisions(self, name: str) -> list[Any]:
        return list(self.cloudrun.list_revisions(name))

    def update_service(self, name: str, spec: ServiceSpec, *, approval_id: str, deadline_s: float) -> Any:
        # A remediation's revision is meant to serve: send traffic to the latest ready revision.
        return self.cloudrun.update_service(
            name, spec, approval_id=approval_id, deadline_s=deadline_s, traffic_to_latest=True
        )

    def rollback(self, name: str, revision: str, *, approval_id: str, deadline_s: float) -> Any:
        return self.cloudrun.rollback(name, revision, approval_id=approval_id, deadline_s=deadline_s)

    def deploy_tagged(
        self,
        name: str,
        spec: ServiceSpec,
        *,
        revision: str,
        tag: str,
        serving: str,
        approval_id: str,
        deadline_s: float,
    ) -> Any:
        """A canary: ``spec`` as revision ``revision``, tagged ``tag``, with no traffic."""
        return self.cloudrun.deploy_tagged(
            name,
            spec,
            revision=revision,
            tag=tag,
            serving=serving,
            approval_id=approval_id,
            deadline_s=deadline_s,
        )

    def set_traffic(
        self,
        name: str,
        percents: dict[str, int],
        *,
        tags: dict[str, str],
        approval_id: str,
        deadline_s: float,
    ) -> Any:
        return self.cloudrun.set_traffic(
            name, percents, tags=tags, approval_id=approval_id, deadline_s=deadline_s
        )

    # -- Cloud Logging --

    def list_entries(self, service: str, *, since: datetime, until: datetime, limit: int) -> list[LogLine]:
        """The newest ``limit`` entries in [since, until], oldest first.

        The logging layer returns at most ``MAX_LIMIT`` per call, so larger reads walk back in time:
        each call ends at the oldest timestamp of the previous one (lines at that boundary
        timestamp, returned twice, are kept once).
        """
        from mcp_tools.cloudlogging import MAX_LIMIT, CloudLogging

        logging_api = CloudLogging(self.settings, policy=self.policy)

        batches: list[list[LogLine]] = []
        total = 0
        end = until
        boundary: set[tuple[str | None, str, str]] = set()
        while total < limit:
            want = min(MAX_LIMIT, limit - total + len(boundary))
            batch = logging_api.list_entries(service, since=since, until=end, limit=want)
            fresh = [ln for ln in batch if (ln.timestamp, ln.severity, ln.message) not in boundary]
            fresh = fresh[-(limit - total) :] if len(fresh) > limit - total else fresh
            if fresh:
                batches.append(fresh)
                total += len(fresh)
            if len(batch) < want or not fresh:
                break
            oldest = batch[0].timestamp
            if not oldest:
                break
            t = datetime.fromisoformat(oldest.replace("Z", "+00:00"))
            if t <= since:
                break
            boundary = {(ln.timestamp, ln.severity, ln.message) for ln in batch if ln.timestamp == oldest}
            end = t
        return [ln for b in reversed(batches) for ln in b]

    # -- Cloud Monitoring --

    def read_series(self, service: str, *, window_s: float, period_s: float, end: datetime) -> Any:
        """The service's time series (``mcp_tools.monitoring.SeriesSet``) over ``window_s`` to ``end``."""
        from mcp_tools.monitoring import read_series

        return read_series(
            service, settings=self.settings, policy=self.policy, window_s=window_s, period_s=period_s, end=end
        )

    def revision_lines(self, service: str, revision: str, *, since: datetime, text: str) -> list[str]:
        """The messages of one revision's log entries since ``since`` that contain ``text``."""
        from mcp_tools.cloudlogging import CloudLogging

        lines = CloudLogging(self.settings, policy=self.policy).list_entries(
            service, since=since, revision=revision, text_filter=text, limit=20
        )
        return [ln.message for ln in lines]

    # -- the vLLM endpoint --

    def endpoint(self, base_url: str) -> SyncEndpoint:
        from mcp_tools.endpoint import VllmEndpoint

        api_key = self.settings.model_api_key if base_url == self.settings.vllm_base_url else None
        return SyncEndpoint(
            VllmEndpoint(base_url, timeout_s=self.settings.http_timeout_s, api_key=api_key), self.policy
        )


class SyncEndpoint:
    """``mcp_tools.endpoint.VllmEndpoint`` (async) for the loop's synchronous nodes.

    Nodes run in a thread without an event loop (LangGraph runs sync nodes in an executor under an
    async driver), so each call gets its own short-lived loop. With a deadline on ``policy``, each
    read's timeout is at most what is left of it.
    """

    def __init__(self, endpoint: Any, policy: CallPolicy | None = None) -> None:
        self.endpoint = endpoint
        self.policy = policy or READ.with_(timeout_s=endpoint.timeout_s)
        self._base_timeout_s = float(endpoint.timeout_s)

    def _bounded(self, what: str) -> None:
        self.endpoint.timeout_s = min(self._base_timeout_s, self.policy.attempt_timeout(what))

    def health(self) -> bool:
        self._bounded("vLLM /health")
        return bool(asyncio.run(self.endpoint.health()))

    def metrics_text(self) -> str:
        self._bounded("vLLM /metrics")
        return str(asyncio.run(self.endpoint.metrics_text()))

    def chat(
        self, messages: list[dict[str, Any]], *, max_tokens: int = 8, timeout: float | None = None
    ) -> Any:
        """One completion; ``timeout`` bounds it (and the model lookup before it) when given."""
        if timeout is not None:
            self.endpoint.timeout_s = min(self._base_timeout_s, timeout)
        return asyncio.run(
            self.endpoint.chat(
                messages, stream=False, max_tokens=max_tokens, temperature=0.0, timeout=timeout
            )
        )
