"""Cloud Run Admin API v2 through the official client (sync, REST), and ServiceSpec <-> run_v2.Service.

``CloudRun(settings)`` is the only way our code reads or changes a Cloud Run service. It uses the
ambient Google credentials and ``GOOGLE_CLOUD_PROJECT`` / ``GOOGLE_CLOUD_LOCATION``; the settings
``run_api_endpoint`` + ``anonymous_credentials`` point it at another endpoint (the local sandbox).

Everything here is synchronous: async callers use ``asyncio.to_thread`` (the async REST client does
not work). Every call goes through ``mcp_tools.google_api`` (bounded retries on transient failures,
a timeout per attempt, one error map: an unknown service or revision is a ``NotFoundError``).
Every mutation carries the approval id as ``x-gemma-sre-approval`` request metadata.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from mcp_tools.errors import UserError, short_error
from mcp_tools.google_api import ApiReader, call
from mcp_tools.names import validate_bucket, validate_revision_name, validate_service_name
from mcp_tools.service_models import ConditionInfo as ConditionInfo
from mcp_tools.service_models import MutationResult as MutationResult
from mcp_tools.service_models import RevisionInfo as RevisionInfo
from mcp_tools.service_models import ServiceInfo as ServiceInfo
from mcp_tools.service_models import ServiceSpec, StartupProbe
from mcp_tools.service_models import TrafficEntry as TrafficEntry

if TYPE_CHECKING:  # the client libraries are heavy: import them where they are used
    from google.cloud import run_v2

log = logging.getLogger(__name__)

APPROVAL_HEADER = "x-gemma-sre-approval"
GPU_LIMIT = "nvidia.com/gpu"
DEFAULT_VLLM_PORT = 8000
MODELS_MOUNT = "/mnt/models"
_FULL_SERVICE_RE = re.compile(
    r"^projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/services/(?P<service>[^/]+)$"
)
_APPROVAL_RE = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")


def _short(resource: str) -> str:
    return resource.rsplit("/", 1)[-1] if resource else resource


# --- conversion ------------------------------------------------------------------------------------


def _enum_name(value: Any) -> str:
    return getattr(value, "name", None) or str(value)


def _ts(value: Any) -> str | None:
    if not value:
        return None
    iso = getattr(value, "isoformat", None)
    if callable(iso):
        try:
            return str(iso())
        except Exception:  # pragma: no cover - odd timestamp types
            return str(value)
    return str(value)


def _condition(c: Any) -> ConditionInfo:
    reason = ""
    for field in ("reason", "revision_reason", "execution_reason"):
        v = getattr(c, field, None)
        if v and int(v) != 0:
            reason = _enum_name(v)
            break
    return ConditionInfo(
        type=c.type_,
        state=_enum_name(c.state),
        message=c.message or "",
        reason=reason,
        severity=_enum_name(c.severity) if int(c.severity) else "",
        last_transition_time=_ts(c.last_transition_time),
    )


def _number(v: str) -> float | int | str:
    try:
        f = float(v)
    except ValueError:
        return v
    return int(f) if f.is_integer() and re.fullmatch(r"\d+", v) else f


def _main_container(containers: Any) -> Any:
    """The serving container: the one with a port, else the first (None when there is none)."""
    if not containers:
        return None
    for c in containers:
        if c.ports:
            return c
    return containers[0]


def _spec_from_parts(
    *,
    name: str,
    region: str | None,
    containers: Any,
    scaling: Any,
    concurrency: int,
    accelerator: str,
    zonal_disabled: bool | None,
) -> ServiceSpec:
    c = _main_container(containers)
    spec = ServiceSpec(name=name, region=region)
    if accelerator:
        spec.gpu_type = accelerator
    if c is not None:
        spec.image = c.image or None
        spec.args = list(c.args)
        spec.env = {e.name: e.value for e in c.env if not e.value_source}
        limits = dict(c.resources.limits) if c.resources else {}
        if "cpu" in limits:
            spec.cpu = _number(limits["cpu"])
        if "memory" in limits:
            spec.memory = limits["memory"]
        if GPU_LIMIT in limits:
            try:
                spec.gpu_count = int(limits[GPU_LIMIT])
            except ValueError:
                log.warning("unreadable GPU limit %r", limits[GPU_LIMIT])
        if "startup_probe" in c:
            p = c.startup_probe
            spec.startup_probe = StartupProbe(
                initial_delay_seconds=p.initial_delay_seconds,
                period_seconds=p.period_seconds or 10,
                timeout_seconds=p.timeout_seconds or 1,
                failure_threshold=p.failure_threshold or 3,
                http_path=(p.http_get.path or "/") if "http_get" in p else None,
            )
    if scaling is not None:
        spec.min_instances = int(scaling.min_instance_count or 0)
        spec.max_instances = int(scaling.max_instance_count) if scaling.max_instance_count else None
    spec.concurrency = int(concurrency) if concurrency else None
    if zonal_disabled is not None:
        spec.gpu_zonal_redundancy = not zonal_disabled
    return spec


def _location_of(full_name: str) -> str | None:
    m = re.match(r"^projects/[^/]+/locations/([^/]+)/", full_name or "")
    return m.group(1) if m else None


def service_to_spec(service: run_v2.Service) -> ServiceSpec:
    """The neutral ServiceSpec of a Cloud Run service (its revision template)."""
    t = service.template
    return _spec_from_parts(
        name=_short(service.name),
        region=_location_of(service.name),
        containers=t.containers,
        scaling=t.scaling if "scaling" in t else None,
        concurrency=t.max_instance_request_concurrency,
        accelerator=t.node_selector.accelerator if "node_selector" in t else "",
        zonal_disabled=t.gpu_zonal_redundancy_disabled if "gpu_zonal_redundancy_disabled" in t else None,
    )


def revision_to_spec(revision: run_v2.Revision) -> ServiceSpec:
    """The ServiceSpec a revision runs (what rolling back to it would serve)."""
    return _spec_from_parts(
        name=_short(revision.service) or _short(revision.name),
        region=_location_of(revision.name),
        containers=revision.containers,
        scaling=revision.scaling if "scaling" in revision else None,
        concurrency=revision.max_instance_request_concurrency,
        accelerator=revision.node_selector.accelerator if "node_selector" in revision else "",
        zonal_disabled=revision.gpu_zonal_redundancy_disabled
        if "gpu_zonal_redundancy_disabled" in revision
        else None,
    )


def _fmt_cpu(cpu: float | int | str) -> str:
    if isinstance(cpu, float) and cpu.is_integer():
        return str(int(cpu))
    return str(cpu)


def _port_of(args: list[str]) -> int:
    from mcp_tools.spec_ops import get_flag

    p = get_flag(args, "--port")
    if isinstance(p, str) and p.isdigit():
        return int(p)
    return DEFAULT_VLLM_PORT


def apply_spec(service: run_v2.Service | None, spec: ServiceSpec) -> run_v2.Service:
    """A new run_v2.Service: ``spec`` rendered onto a copy of ``service`` (or onto a fresh one).

    Only what ServiceSpec describes changes; everything else (volumes, secrets in env, service
    account, command, labels, ...) is carried over from the current service. The template's explicit
    revision name is cleared so Cloud Run names the new revision.
    """
    from google.cloud import run_v2

    if service is None:
        svc = run_v2.Service()
        svc.template.containers.append(
            run_v2.Container(name="vllm", ports=[run_v2.ContainerPort(container_port=_port_of(spec.args))])
        )
        svc.labels["managed-by"] = "gemma-sre"
    else:
        svc = run_v2.Service.deserialize(run_v2.Service.serialize(service))
    t = svc.template
    t.revision = ""
    if not t.containers:
        t.containers.append(run_v2.Container(name="vllm"))
    c = _main_container(t.containers)

    if spec.image:
        c.image = spec.image
    c.args = list(spec.args)
    kept = [e for e in c.env if e.value_source and e.name not in spec.env]
    c.env = [*kept, *(run_v2.EnvVar(name=k, value=str(v)) for k, v in spec.env.items())]

    limits = dict(c.resources.limits) if "resources" in c else {}
    if spec.cpu is not None:
        limits["cpu"] = _fmt_cpu(spec.cpu)
    if spec.memory is not None:
        limits["memory"] = spec.memory
    if spec.gpu_type:
        limits[GPU_LIMIT] = str(spec.gpu_count)
        t.node_selector = run_v2.NodeSelector(accelerator=spec.gpu_type)
        if service is None:
            c.resources.cpu_idle = False  # GPUs need CPU always allocated
    else:
        limits.pop(GPU_LIMIT, None)
        if "node_selector" in t:
            del t.node_selector
    c.resources.limits = limits

    if spec.gpu_zonal_redundancy is not None:
        t.gpu_zonal_redundancy_disabled = not spec.gpu_zonal_redundancy
    t.scaling.min_instance_count = spec.min_instances
    t.scaling.max_instance_count = spec.max_instances or 0
    t.max_instance_request_concurrency = spec.concurrency or 0

    if spec.startup_probe is not None:
        p = spec.startup_probe
        probe = run_v2.Probe(
            initial_delay_seconds=p.initial_delay_seconds,
            period_seconds=p.period_seconds,
            timeout_seconds=p.timeout_seconds,
            failure_threshold=p.failure_threshold,
        )
        port = c.ports[0].container_port if c.ports else 0
        if p.http_path:
            probe.http_get = run_v2.HTTPGetAction(path=p.http_path, port=port)
        else:
            probe.tcp_socket = run_v2.TCPSocketAction(port=port)
        c.startup_probe = probe
    return svc


def add_gcs_volume(svc: run_v2.Service, bucket: str, mount_path: str = MODELS_MOUNT) -> None:
    """Mount a Cloud Storage bucket read-only into the serving container (Cloud Storage FUSE)."""
    from google.cloud import run_v2

    bucket = validate_bucket(bucket)
    t = svc.template
    t.volumes.append(run_v2.Volume(name="models", gcs=run_v2.GCSVolumeSource(bucket=bucket, read_only=True)))
    c = _main_container(t.containers)
    c.volume_mounts.append(run_v2.VolumeMount(name="models", mount_path=mount_path))
    t.execution_environment = run_v2.ExecutionEnvironment.EXECUTION_ENVIRONMENT_GEN2  # type: ignore[assignment]


# --- the client ------------------------------------------------------------------------------------


def _check_approval(approval_id: str) -> str:
    if not isinstance(approval_id, str) or not _APPROVAL_RE.fullmatch(approval_id):
        raise UserError(
            "a Cloud Run mutation needs an approval id (1-128 letters, digits, '.', '_', ':' or '-')"
        )
    return approval_id


class CloudRun(ApiReader):
    """Cloud Run services and revisions in one project and region."""

    # -- plumbing --

    @property
    def location(self) -> str:
        if not self.settings.location:
            raise UserError("no Cloud Run region: set GOOGLE_CLOUD_LOCATION (e.g. the service's region)")
        return self.settings.location

    @property
    def parent(self) -> str:
        return f"projects/{self.project}/locations/{self.location}"

    def _run_client(self, cls_name: str) -> Any:
        return self.lazy_client(
            cls_name, "google.cloud.run_v2", cls_name, endpoint=self.settings.run_api_endpoint
        )

    @property
    def services(self) -> Any:
        return self._run_client("ServicesClient")

    @property
    def revisions(self) -> Any:
        return self._run_client("RevisionsClient")

    def service_path(self, name: str) -> str:
        """The full resource name for a short service name (or a full one in this project/region)."""
        m = _FULL_SERVICE_RE.fullmatch(name or "")
        if m:
            validate_service_name(m.group("service"))
            return name
        return f"{self.parent}/services/{validate_service_name(name)}"

    def _call(self, what: str, fn: Any, *args: Any, mutation: bool = False, **kwargs: Any) -> Any:
        """One API call through ``google_api.call`` (bounded retries, a timeout, one error map)."""
        policy = self.policy.with_(mutation=True) if mutation else self.policy
        not_found = f"{what}: not found in project {self.project}, region {self.location}"
        return call(what, lambda: fn(*args, **kwargs, **policy.rpc), policy=policy, not_found=not_found)

    # -- reads --

    def get_raw(self, name: str) -> run_v2.Service:
        path = self.service_path(name)
        return self._call(f"service {_short(path)!r}", self.services.get_service, name=path)

    def get_service(self, name: str, *, with_revisions: bool = True) -> ServiceInfo:
        """The service, its spec, URL, traffic and conditions (and its revisions' conditions)."""
        svc = self.get_raw(name)
        info = _service_info(svc)
        if with_revisions:
            info.revisions = self.list_revisions(name, _traffic=info.traffic)
        return info

    def list_services(self) -> list[ServiceInfo]:
        services = self._call("list services", _all(self.services.list_services), parent=self.parent)
        return [_service_info(s) for s in services]

    def list_revisions(
        self, name: str, *, limit: int = 50, _traffic: list[TrafficEntry] | None = None
    ) -> list[RevisionInfo]:
        """The service's revisions, newest first (at most ``limit``)."""
        path = self.service_path(name)
        if _traffic is None:
            _traffic = _service_info(self.get_raw(name)).traffic
        revisions = self._call(
            f"revisions of {_short(path)!r}",
            _all(self.revisions.list_revisions, limit=limit),
            request={"parent": path, "page_size": min(limit, 100)},
        )
        percent: dict[str, int] = {}
        for t in _traffic:
            if t.revision:
                percent[t.revision] = percent.get(t.revision, 0) + t.percent
        out: list[RevisionInfo] = []
        for r in revisions:
            out.append(_revision_info(r, percent))
        out.sort(key=lambda r: r.create_time or "", reverse=True)
        return out

    # -- mutations --

    def _mutate(
        self, what: str, fn: Any, approval_id: str, deadline_s: float, **kwargs: Any
    ) -> tuple[Any, str]:
        """One mutating call, carrying its approval id, and its operation awaited: every change to a
        service goes through here."""
        op = self._call(what, fn, metadata=[(APPROVAL_HEADER, approval_id)], mutation=True, **kwargs)
        return self._wait(what, op, deadline_s)

    def _update(self, name: str, svc: Any, what: str, approval_id: str, deadline_s: float) -> MutationResult:
        """Send ``svc`` as the service's new spec (a new revision) and follow the rollout."""
        result, message = self._mutate(
            what, self.services.update_service, approval_id, deadline_s, service=svc
        )
        return self._rollout("update", name, result, message, approval_id)

    def _rollout(
        self, operation: str, name: str, result: Any, message: str, approval_id: str
    ) -> MutationResult:
        """Whether the revision a create or update made came up Ready."""
        after = self.get_raw(name)
        revision = _short(after.latest_created_revision) or None
        ready = result is not None and bool(revision) and _short(after.latest_ready_revision) == revision
        if not ready and not message:
            message = _failed_message(after) or "the new revision is not ready"
        return MutationResult(
            service=_short(after.name),
            operation=operation,
            revision=revision,
            ready=ready,
            message=message or "ready",
            approval_id=approval_id,
        )

    def _wait(self, what: str, op: Any, deadline_s: float) -> tuple[Any, str]:
        """Wait for a long-running operation: (its result or None, a message)."""
        import concurrent.futures

        from google.api_core import exceptions as gexc
        from google.api_core.future import polling

        # Google's default polling waits a second (with jitter) before its first look, then 1.5 times
        # longer each time: a traffic change that Cloud Run finishes in a second (each canary step)
        # would wait for that look. From 0.1 s with the same growth and cap: a few more reads of
        # the operation over a long rollout, and a quick change noticed when it is done.
        quick = polling.DEFAULT_POLLING.with_delay(initial=0.1)
        try:
            return op.result(timeout=deadline_s, polling=quick), ""
        except (concurrent.futures.TimeoutError, TimeoutError):
            return None, f"{what}: not finished after {deadline_s:.0f} s (still rolling out)"
        except gexc.GoogleAPICallError as e:
            return None, f"{what}: {short_error(e)}"

    def update_service(
        self,
        name: str,
        new_spec: ServiceSpec,
        *,
        approval_id: str,
        deadline_s: float = 900.0,
        traffic_to_latest: bool = True,
    ) -> MutationResult:
        """Apply ``new_spec`` (a new revision), waiting for the rollout up to ``deadline_s``.

        With ``traffic_to_latest`` (default) all traffic follows the latest Ready revision, as after
        ``gcloud run deploy``: a traffic pin left by an earlier rollback would otherwise keep the fix
        from serving. A revision that never becomes Ready gets no traffic either way."""
        _check_approval(approval_id)
        current = self.get_raw(name)
        svc = apply_spec(current, new_spec)
        if traffic_to_latest:
            from google.cloud import run_v2

            svc.traffic = [
                run_v2.TrafficTarget(
                    type_=run_v2.TrafficTargetAllocationType.TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST,
                    percent=100,
                )
            ]
        return self._update(name, svc, f"update {_short(current.name)!r}", approval_id, deadline_s)

    def deploy_tagged(
        self,
        name: str,
        new_spec: ServiceSpec,
        *,
        revision: str,
        tag: str,
        serving: str,
        approval_id: str,
        deadline_s: float = 900.0,
    ) -> MutationResult:
        """Apply ``new_spec`` as a new revision named ``revision`` that gets NO traffic, only the tag
        ``tag`` (its own URL): all traffic stays on ``serving``, as ``gcloud run deploy --no-traffic
        --tag`` does. A canary's first step; :meth:`set_traffic` moves traffic to it afterwards."""
        _check_approval(approval_id)
        revision = validate_revision_name(_short(revision))
        current = self.get_raw(name)
        svc = apply_spec(current, new_spec)
        svc.template.revision = revision
        svc.traffic = _targets({validate_revision_name(_short(serving)): 100, revision: 0}, {revision: tag})
        what = f"deploy {revision!r} to {_short(current.name)!r} with no traffic (tag {tag!r})"
        return self._update(name, svc, what, approval_id, deadline_s)

    def set_traffic(
        self,
        name: str,
        percents: dict[str, int],
        *,
        tags: dict[str, str] | None = None,
        approval_id: str,
        deadline_s: float = 300.0,
        operation: str = "traffic",
    ) -> MutationResult:
        """Route traffic by percent to existing revisions of this service (the percents sum to 100;
        a revision given traffic must be Ready); ``tags`` keeps a revision's tag (its own URL), and
        every tag not named there is dropped."""
        _check_approval(approval_id)
        percents = {validate_revision_name(_short(r)): int(p) for r, p in percents.items()}
        if sum(percents.values()) != 100 or any(not 0 <= p <= 100 for p in percents.values()):
            raise UserError(f"traffic percents must be from 0 to 100 and sum to 100, not {percents}")
        current = self.get_raw(name)
        revs = {r.name: r for r in self.list_revisions(name, _traffic=[])}
        for revision, pct in percents.items():
            if revision not in revs:
                raise UserError(
                    f"revision {revision!r} is not a revision of service {_short(current.name)!r} "
                    f"(known: {', '.join(sorted(revs)) or 'none'})"
                )
            if pct and not revs[revision].ready:
                raise UserError(f"revision {revision!r} is not Ready; route traffic only to a Ready revision")
        from google.cloud import run_v2

        svc = run_v2.Service.deserialize(run_v2.Service.serialize(current))
        svc.traffic = _targets(percents, tags or {})
        split = ", ".join(f"{r} {p}%" for r, p in percents.items())
        what = f"{operation} {_short(current.name)!r}: {split}"
        result, message = self._mutate(
            what, self.services.update_service, approval_id, deadline_s, service=svc
        )
        after = _service_info(self.get_raw(name))
        ready = result is not None and all(after.percent_of(r) == p for r, p in percents.items())
        top = max(percents, key=lambda r: percents[r])
        return MutationResult(
            service=after.name,
            operation=operation,
            revision=top,
            ready=ready,
            message=message or ("traffic routed" if ready else "traffic not routed as asked yet"),
            approval_id=approval_id,
        )

    def rollback(
        self, name: str, revision: str, *, approval_id: str, deadline_s: float = 300.0
    ) -> MutationResult:
        """Route 100% of traffic to ``revision`` (an existing, Ready revision of this service)."""
        return self.set_traffic(
            name, {revision: 100}, approval_id=approval_id, deadline_s=deadline_s, operation="rollback"
        )

    def create_service(
        self,
        spec: ServiceSpec,
        *,
        approval_id: str,
        deadline_s: float = 900.0,
        gcs_bucket: str | None = None,
        mount_path: str = MODELS_MOUNT,
    ) -> MutationResult:
        """Create a service from ``spec`` (``spec.name`` is its name) and wait for it to be Ready.

        ``gcs_bucket`` mounts that Cloud Storage bucket read-only at ``mount_path`` (the weights)."""
        _check_approval(approval_id)
        name = validate_service_name(spec.name)
        svc = apply_spec(None, spec)
        if gcs_bucket:
            add_gcs_volume(svc, gcs_bucket, mount_path)
        what = f"create {name!r}"
        result, message = self._mutate(
            what,
            self.services.create_service,
            approval_id,
            deadline_s,
            parent=self.parent,
            service=svc,
            service_id=name,
        )
        return self._rollout("create", name, result, message, approval_id)

    def delete_service(self, name: str, *, approval_id: str, deadline_s: float = 300.0) -> MutationResult:
        """Delete a service (only ``destroy_vllm`` does this; it is never a remediation)."""
        _check_approval(approval_id)
        path = self.service_path(name)
        what = f"delete {_short(path)!r}"
        result, message = self._mutate(what, self.services.delete_service, approval_id, deadline_s, name=path)
        return MutationResult(
            service=_short(path),
            operation="delete",
            ready=result is not None,
            message=message or "deleted",
            approval_id=approval_id,
        )


def _targets(percents: dict[str, int], tags: dict[str, str]) -> list[Any]:
    """Cloud Run traffic targets naming revisions: one per revision, with its percent and tag."""
    from google.cloud import run_v2

    kind = run_v2.TrafficTargetAllocationType.TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION
    return [
        run_v2.TrafficTarget(type_=kind, revision=r, percent=p, tag=tags.get(r, ""))
        for r, p in percents.items()
    ]


def _all(method: Any, limit: int | None = None) -> Any:
    """``method``'s pager read to the end (or ``limit`` items) inside one call, so that every page's
    request is retried and mapped like the first."""
    from itertools import islice

    return lambda *a, **kw: list(islice(method(*a, **kw), limit))


def _failed_message(svc: Any) -> str:
    for c in [svc.terminal_condition, *svc.conditions]:
        if c and _enum_name(c.state) == "CONDITION_FAILED" and c.message:
            return str(c.message)
    return ""


def _service_info(svc: Any) -> ServiceInfo:
    traffic: list[TrafficEntry] = []
    latest_ready = _short(svc.latest_ready_revision) or None
    for t in svc.traffic_statuses or svc.traffic:
        latest = _enum_name(t.type_).endswith("LATEST")
        traffic.append(
            TrafficEntry(
                revision=_short(t.revision) or (latest_ready if latest else None),
                percent=int(t.percent),
                latest=latest,
                tag=t.tag or None,
                uri=getattr(t, "uri", "") or None,
            )
        )
    tc = _condition(svc.terminal_condition) if "terminal_condition" in svc else None
    return ServiceInfo(
        name=_short(svc.name),
        full_name=svc.name,
        spec=service_to_spec(svc),
        uri=svc.uri or None,
        latest_ready_revision=_short(svc.latest_ready_revision) or None,
        latest_created_revision=_short(svc.latest_created_revision) or None,
        traffic=traffic,
        conditions=[_condition(c) for c in svc.conditions],
        terminal_condition=tc,
        etag=svc.etag or None,
    )


def _revision_info(r: Any, percent: dict[str, int]) -> RevisionInfo:
    conditions = [_condition(c) for c in r.conditions]
    ready = any(c.type == "Ready" and c.state == "CONDITION_SUCCEEDED" for c in conditions)
    short = _short(r.name)
    return RevisionInfo(
        name=short,
        full_name=r.name,
        create_time=_ts(r.create_time),
        ready=ready,
        conditions=conditions,
        spec=revision_to_spec(r),
        traffic_percent=percent.get(short, 0),
    )
