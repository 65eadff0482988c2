"""Cloud Run Admin API v2 state: services, revisions and long-running operations.

Resources are kept as wire JSON (camelCase keys, enum names as strings), validated against the
official protobuf schema (``google.cloud.run_v2``) on the way in, so what the client sends and
reads back is exactly what Cloud Run would accept and answer. Time is the sandbox clock: a
revision's start-up unfolds lazily, on every call ``advance()`` applies what is due (log lines,
Ready or failure, the operation's end), so nothing runs in the background.

As on Cloud Run, a revision that fails to start takes no traffic: the service keeps serving its
last ready revision, ``latestCreatedRevision`` names the failed one, the operation ends with an
error (``google.rpc.Code`` 13, "Revision '...' is not ready and cannot serve traffic. ...", the
wording Terraform and gcloud report), and the revision's conditions say why.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from google.protobuf import json_format

from mcp_tools.cloudrun_limits import Shape, violations
from sandbox.clock import SimClock, rfc3339
from sandbox.cloudlogging.model import LogStore, run_resource
from sandbox.errors import ApiError, bad_request, not_found
from sandbox.outcome import RevisionContext, StartupOutcome

logger = logging.getLogger(__name__)

SERVICE_TYPE = "type.googleapis.com/google.cloud.run.v2.Service"
REVISION_TYPE = "type.googleapis.com/google.cloud.run.v2.Revision"
OP_ERROR_CODE = 13  # what Cloud Run's operation reports for a revision that cannot serve

Physics = Callable[[RevisionContext], StartupOutcome]

_ID_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789"
TAG_SEP = "---"  # between a tag and its service in a tag's URL, as in Cloud Run's tag URLs
_TAG_RE = re.compile(r"^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$")


def _proto(kind: str) -> Any:
    from google.cloud import run_v2

    cls: Any = {"Service": run_v2.Service, "Revision": run_v2.Revision}[kind]
    return cls.pb()()


def validate_service_json(body: Any) -> dict[str, Any]:
    """Parse a Service body with the official schema: unknown fields and bad enum values are a 400.
    Returns canonical wire JSON (camelCase, enum names)."""
    if not isinstance(body, dict):
        raise bad_request("Invalid JSON payload received. Expected an object for 'service'.")
    msg = _proto("Service")
    try:
        json_format.ParseDict(body, msg, ignore_unknown_fields=False)
    except json_format.ParseError as e:
        raise bad_request(f"Invalid JSON payload received. {e}") from None
    except (TypeError, ValueError, AttributeError, KeyError) as e:  # pragma: no cover - defensive
        raise bad_request(f"Invalid JSON payload received. {e}") from None
    return json_format.MessageToDict(msg, preserving_proto_field_name=False)


def _snake(path: str) -> str:
    out = []
    for ch in path:
        if ch.isupper():
            out.append("_" + ch.lower())
        else:
            out.append(ch)
    return "".join(out)


def _shape(t: dict[str, Any], containers: list[dict[str, Any]], accel: str | None, gpus: int) -> Shape:
    """The revision's instance shape (summed over its containers), as the limits speak of it."""
    limits = [((c.get("resources") or {}).get("limits") or {}) for c in containers]
    cpus = [parse_quantity(lim["cpu"]) for lim in limits if "cpu" in lim]
    mems = [parse_quantity(lim["memory"]) for lim in limits if "memory" in lim]
    scaling = t.get("scaling") or {}
    probe = next((c.get("startupProbe") for c in containers if c.get("startupProbe")), None) or {}

    def num(d: dict[str, Any], key: str) -> int | None:
        return int(d[key]) if key in d else None

    cc = t.get("maxInstanceRequestConcurrency")
    return Shape(
        cpu=round(sum(cpus), 3) if cpus else None,
        memory=f"{sum(mems) / 1024**3:g}Gi" if mems else None,
        gpu_type=accel,
        gpu_count=gpus,
        min_instances=num(scaling, "minInstanceCount"),
        max_instances=num(scaling, "maxInstanceCount"),
        concurrency=int(cc) if cc is not None else None,
        probe_initial_delay_s=num(probe, "initialDelaySeconds"),
        probe_period_s=num(probe, "periodSeconds"),
        probe_timeout_s=num(probe, "timeoutSeconds"),
        probe_failure_threshold=num(probe, "failureThreshold"),
    )


def parse_quantity(q: str) -> float:
    """A Kubernetes quantity as a number of bytes (memory) or cores (cpu: '8', '8000m', '4.0')."""
    s = str(q).strip()
    units = {
        "Ki": 1024,
        "Mi": 1024**2,
        "Gi": 1024**3,
        "Ti": 1024**4,
        "k": 1e3,
        "K": 1e3,
        "M": 1e6,
        "G": 1e9,
        "T": 1e12,
        "m": 1e-3,
    }
    for u in sorted(units, key=len, reverse=True):
        if s.endswith(u):
            return float(s[: -len(u)]) * units[u]
    return float(s)


def _check_etag(etag: str | None, resource: dict[str, Any], what: str, hint: str = "") -> None:
    """ABORTED, as Cloud Run answers it, when a request's etag is not the resource's current one."""
    if etag and etag != resource.get("etag"):
        raise ApiError("ABORTED", f"The etag '{etag}' does not match the current etag of {what}.{hint}")


@dataclass
class Revision:
    project: str
    location: str
    service: str
    short: str
    data: dict[str, Any]
    created_s: float
    outcome: StartupOutcome
    state: str = "starting"  # starting | ready | failed
    next_log: int = 0
    operations: list[str] = field(default_factory=list)
    app: Any = None  # the ASGI app serving this revision once ready
    sim: Any = None  # the VllmSim behind ``app``

    @property
    def name(self) -> str:
        svc = f"projects/{self.project}/locations/{self.location}/services/{self.service}"
        return f"{svc}/revisions/{self.short}"

    @property
    def settle_s(self) -> float:
        return self.created_s + self.outcome.duration_s


@dataclass(frozen=True)
class DeleteOptions:
    """A delete's query parameters (services.delete, revisions.delete)."""

    etag: str | None = None  # refuse (ABORTED) unless the resource still has this etag
    validate_only: bool = False  # check and answer, but delete nothing


@dataclass
class Operation:
    name: str
    data: dict[str, Any]
    revision: str | None = None  # short name of the revision whose fate ends it
    service_key: tuple[str, str, str] | None = None


class CloudRunBackend:
    """All Cloud Run state of the sandbox. Thread-safe (one re-entrant lock)."""

    def __init__(
        self,
        clock: SimClock,
        logs: LogStore,
        physics: Physics,
        *,
        base_url: Callable[[], str] = lambda: "http://127.0.0.1",
        zero_latency: bool = False,
        app_factory: Callable[[Revision], tuple[Any, Any]] | None = None,
    ) -> None:
        self.clock = clock
        self.logs = logs
        self.physics = physics
        self.base_url = base_url
        self.zero_latency = zero_latency
        self.app_factory = app_factory
        self.lock = threading.RLock()
        self.services: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.revisions: dict[tuple[str, str, str], dict[str, Revision]] = {}
        self.operations: dict[str, Operation] = {}
        self._rr: dict[tuple[str, str, str], int] = {}

    # ------------------------------------------------------------------------------ helpers
    def _now(self) -> float:
        return self.clock.now_s()

    def service_uri(self, project: str, location: str, service: str) -> str:
        return f"{self.base_url()}/_run/{project}/{location}/{service}"

    def tag_uri(self, project: str, location: str, service: str, tag: str) -> str:
        """A traffic tag's own URL: Cloud Run's ``https://TAG---SERVICE-HASH.a.run.app``, served on the
        sandbox's port as ``/_run/{project}/{location}/TAG---SERVICE``."""
        return self.service_uri(project, location, f"{tag}{TAG_SEP}{service}")

    def _etag(self, svc: dict[str, Any]) -> str:
        h = hashlib.sha256(f"{svc['name']}|{svc.get('generation')}|{svc.get('updateTime')}".encode())
        return h.hexdigest()[:24]

    def _get_service(self, project: str, location: str, service: str) -> dict[str, Any]:
        svc = self.services.get((project, location, service))
        if svc is None:
            raise not_found(
                f"Resource 'projects/{project}/locations/{location}/services/{service}' was not found"
            )
        return svc

    def _revision_name(self, service: str, generation: int) -> str:
        h = hashlib.sha256(f"{service}:{generation}:{uuid.uuid4()}".encode()).digest()
        suffix = "".join(_ID_CHARS[b % len(_ID_CHARS)] for b in h[:3])
        return f"{service}-{generation:05d}-{suffix}"

    # ------------------------------------------------------------------------------ defaults
    def _default_template(self, template: dict[str, Any]) -> dict[str, Any]:
        """Fill the defaults Cloud Run fills (what a GET shows even when the create body omitted them)."""
        t = copy.deepcopy(template)
        t.setdefault("timeout", "300s")
        t.setdefault("maxInstanceRequestConcurrency", 80)
        t.setdefault("executionEnvironment", "EXECUTION_ENVIRONMENT_GEN2" if t.get("nodeSelector") else None)
        if t.get("executionEnvironment") is None:
            t.pop("executionEnvironment")
        scaling = t.setdefault("scaling", {})
        scaling.setdefault("maxInstanceCount", 100)
        containers = t.get("containers") or []
        for i, c in enumerate(containers):
            res = c.setdefault("resources", {})
            limits = res.setdefault("limits", {})
            limits.setdefault("cpu", "1000m")
            limits.setdefault("memory", "512Mi")
            if i == 0:
                ports = c.setdefault("ports", [{"name": "http1", "containerPort": 8080}])
                port = ports[0].get("containerPort", 8080) if ports else 8080
                c.setdefault(
                    "startupProbe",
                    {
                        "timeoutSeconds": 240,
                        "periodSeconds": 240,
                        "failureThreshold": 1,
                        "tcpSocket": {"port": port},
                    },
                )
        return t

    def _validate_template(self, t: dict[str, Any]) -> None:
        containers = t.get("containers") or []
        if not containers:
            raise bad_request(
                "spec.template.spec.containers: at least one container is required",
                "service.template.containers",
            )
        for i, c in enumerate(containers):
            if not c.get("image"):
                raise bad_request(
                    f"spec.template.spec.containers[{i}].image: Required",
                    f"service.template.containers[{i}].image",
                )
            limits = (c.get("resources") or {}).get("limits") or {}
            for key in ("cpu", "memory"):
                if key in limits:
                    try:
                        parse_quantity(limits[key])
                    except ValueError:
                        raise bad_request(
                            f"spec.template.spec.containers[{i}].resources.limits.{key}: "
                            f"Invalid value specified for {key}: {limits[key]!r}",
                            f"service.template.containers[{i}].resources.limits.{key}",
                        ) from None
            gpu = limits.get("nvidia.com/gpu")
            if gpu is not None and not str(gpu).isdigit():
                raise bad_request(
                    f"spec.template.spec.containers[{i}].resources.limits.nvidia.com/gpu: "
                    f"Invalid value {gpu!r}: must be a whole number",
                    f"service.template.containers[{i}].resources.limits",
                )
        for i, c in enumerate(containers):
            probe = c.get("startupProbe") or {}
            for k in ("initialDelaySeconds", "timeoutSeconds", "periodSeconds", "failureThreshold"):
                if k in probe and int(probe[k]) < (0 if k == "initialDelaySeconds" else 1):
                    raise bad_request(
                        f"spec.template.spec.containers[{i}].startupProbe.{k}: Invalid value {probe[k]}",
                        f"service.template.containers[{i}].startup_probe",
                    )
        scaling = t.get("scaling") or {}
        lo, hi = int(scaling.get("minInstanceCount", 0)), int(scaling.get("maxInstanceCount", 100))
        if lo < 0 or hi < 0 or lo > hi:
            raise bad_request(
                f"spec.template.scaling: min instances ({lo}) and max instances ({hi}) must be >= 0 with "
                "min <= max",
                "service.template.scaling",
            )
        accel = (t.get("nodeSelector") or {}).get("accelerator")
        if accel:
            from mcp_tools.capacity import resolve_gpu
            from mcp_tools.errors import UserError

            try:
                resolve_gpu(accel)
            except UserError:
                raise bad_request(
                    f"spec.template.spec.nodeSelector.accelerator: Invalid value '{accel}': "
                    "not a known GPU type",
                    "service.template.node_selector.accelerator",
                ) from None
        gpus = sum(
            int(((c.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu", 0)) for c in containers
        )
        if accel and gpus == 0:
            raise bad_request(
                "spec.template.spec.nodeSelector: an accelerator requires a container with a "
                "'nvidia.com/gpu' resource limit",
                "service.template.node_selector",
            )
        if gpus and not accel:
            raise bad_request(
                "spec.template.spec.containers.resources.limits: 'nvidia.com/gpu' requires "
                "spec.template.spec.nodeSelector.accelerator",
                "service.template.node_selector",
            )
        bad = violations(_shape(t, containers, accel, gpus))
        if bad:
            # Cloud Run refuses a revision outside its limits with 400 INVALID_ARGUMENT, naming them.
            raise bad_request("spec.template: " + "; ".join(bad), "service.template")

    def _check_revision_name(self, key: tuple[str, str, str], template: dict[str, Any]) -> None:
        short = template.get("revision")
        if not short:
            return
        if not short.startswith(key[2] + "-"):
            raise bad_request(
                f"spec.template.metadata.name: Revision name '{short}' must be prefixed by the service name "
                f"'{key[2]}-'",
                "service.template.revision",
            )
        if short in self.revisions.get(key, {}):
            raise ApiError("ALREADY_EXISTS", f"Revision named '{short}' already exists.")

    def _validate_traffic(
        self, key: tuple[str, str, str], traffic: list[dict[str, Any]], latest_name: str | None
    ) -> None:
        if not traffic:
            return
        total = 0
        revs = self.revisions.get(key, {})
        tags: set[str] = set()
        for t in traffic:
            typ = t.get("type", "TRAFFIC_TARGET_ALLOCATION_TYPE_UNSPECIFIED")
            pct = int(t.get("percent", 0))
            tag = t.get("tag")
            if tag is not None:
                if not _TAG_RE.fullmatch(tag) or TAG_SEP in tag:
                    raise bad_request(
                        f"spec.traffic: tag '{tag}' must be lower-case letters, digits and single hyphens, "
                        "starting with a letter",
                        "service.traffic",
                    )
                if tag in tags:
                    raise bad_request(f"spec.traffic: tag '{tag}' is used more than once", "service.traffic")
                tags.add(tag)
            if not 0 <= pct <= 100:
                raise bad_request(
                    f"spec.traffic: percent must be between 0 and 100, not {pct}", "service.traffic"
                )
            total += pct
            if typ == "TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION":
                rev = t.get("revision", "")
                if not rev:
                    raise bad_request(
                        "spec.traffic: a REVISION target needs a revision name", "service.traffic"
                    )
                if rev not in revs and rev != latest_name:
                    raise bad_request(
                        f"spec.traffic: Revision named '{rev}' does not exist", "service.traffic"
                    )
                r = revs.get(rev)
                if r is not None and r.state == "failed" and pct > 0:
                    raise ApiError(
                        "FAILED_PRECONDITION",
                        f"Revision '{rev}' is not ready and cannot serve traffic.",
                    )
            elif typ != "TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST":
                raise bad_request(
                    "spec.traffic: type must be TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST or "
                    "TRAFFIC_TARGET_ALLOCATION_TYPE_REVISION",
                    "service.traffic",
                )
        if total != 100:
            raise bad_request(f"spec.traffic: percentages must sum to 100, not {total}", "service.traffic")

    # ------------------------------------------------------------------------------ conditions
    def _cond(
        self,
        typ: str,
        state: str,
        message: str = "",
        reason: str | None = None,
        severity: str | None = None,
        revision_reason: str | None = None,
    ) -> dict[str, Any]:
        c: dict[str, Any] = {"type": typ, "state": state, "lastTransitionTime": rfc3339(self._now())}
        if message:
            c["message"] = message
        if severity:
            c["severity"] = severity
        if reason:
            c["reason"] = reason
        if revision_reason:
            c["revisionReason"] = revision_reason
        return c

    def _refresh_service(self, key: tuple[str, str, str]) -> None:
        """Recompute the service's status fields from its revisions."""
        svc = self.services[key]
        revs = self.revisions.get(key, {})
        latest_created = svc.get("latestCreatedRevision", "").rsplit("/", 1)[-1]
        lc = revs.get(latest_created)
        ready = [r for r in revs.values() if r.state == "ready"]
        latest_ready = max(ready, key=lambda r: r.created_s) if ready else None
        prefix = f"projects/{key[0]}/locations/{key[1]}/services/{key[2]}/revisions/"
        if latest_ready is not None:
            svc["latestReadyRevision"] = prefix + latest_ready.short
        else:
            svc.pop("latestReadyRevision", None)
        # traffic statuses (LATEST resolves to the latest ready revision)
        statuses = []
        for t in svc.get("traffic") or []:
            st = {k: v for k, v in t.items() if k in ("type", "revision", "percent", "tag")}
            if t.get("tag"):
                st["uri"] = self.tag_uri(*key, t["tag"])
            statuses.append(st)
        svc["trafficStatuses"] = statuses
        routes_ok = latest_ready is not None
        conds: list[dict[str, Any]] = []
        if lc is not None and lc.state == "starting":
            svc["reconciling"] = True
            svc["terminalCondition"] = self._cond(
                "Ready", "CONDITION_RECONCILING", f"Deploying revision '{lc.short}'."
            )
            conds.append(
                self._cond("RoutesReady", "CONDITION_SUCCEEDED" if routes_ok else "CONDITION_PENDING")
            )
            conds.append(
                self._cond("ConfigurationsReady", "CONDITION_RECONCILING", f"Creating revision '{lc.short}'.")
            )
        elif lc is not None and lc.state == "failed":
            why = lc.outcome.failure_message or ""
            msg = f"Revision '{lc.short}' is not ready and cannot serve traffic. {why}".strip()
            svc["reconciling"] = False
            svc["terminalCondition"] = self._cond(
                "Ready", "CONDITION_FAILED", msg, reason="REVISION_FAILED", severity="ERROR"
            )
            conds.append(
                self._cond(
                    "RoutesReady",
                    "CONDITION_SUCCEEDED" if routes_ok else "CONDITION_FAILED",
                    "" if routes_ok else msg,
                )
            )
            conds.append(
                self._cond(
                    "ConfigurationsReady", "CONDITION_FAILED", msg, reason="REVISION_FAILED", severity="ERROR"
                )
            )
        else:
            svc["reconciling"] = False
            svc["terminalCondition"] = self._cond("Ready", "CONDITION_SUCCEEDED")
            conds.append(self._cond("RoutesReady", "CONDITION_SUCCEEDED"))
            conds.append(self._cond("ConfigurationsReady", "CONDITION_SUCCEEDED"))
        # keep lastTransitionTime stable when the state did not change
        old = {c["type"]: c for c in svc.get("conditions", [])}
        for c in conds:
            o = old.get(c["type"])
            if o is not None and o.get("state") == c["state"]:
                c["lastTransitionTime"] = o["lastTransitionTime"]
        old_term = svc.get("_terminal_state")
        if old_term == svc["terminalCondition"]["state"] and "_terminal_time" in svc:
            svc["terminalCondition"]["lastTransitionTime"] = svc["_terminal_time"]
        svc["_terminal_state"] = svc["terminalCondition"]["state"]
        svc["_terminal_time"] = svc["terminalCondition"]["lastTransitionTime"]
        svc["conditions"] = conds
        svc["observedGeneration"] = svc.get("generation", "1")

    # ------------------------------------------------------------------------------ time
    def advance(self) -> None:
        """Apply everything due by now: revision log lines, Ready / failure, operations ending."""
        with self.lock:
            now = self._now()
            for key, revs in self.revisions.items():
                for rev in revs.values():
                    if rev.state != "starting":
                        continue
                    self._emit_logs(rev, now)
                    if now >= rev.settle_s:
                        self._settle(key, rev)

    def _emit_logs(self, rev: Revision, now: float) -> None:
        lines = rev.outcome.logs
        while rev.next_log < len(lines) and rev.created_s + lines[rev.next_log].offset_s <= now:
            ln = lines[rev.next_log]
            self.logs.append(
                project=rev.project,
                log_id=ln.log_id,
                timestamp=rev.created_s + ln.offset_s,
                severity=ln.severity,
                text=ln.text,
                json_payload=ln.json_payload,
                resource=run_resource(rev.project, rev.location, rev.service, rev.short),
                labels={"instanceId": hashlib.sha256(rev.short.encode()).hexdigest()[:64]},
            )
            rev.next_log += 1

    def _settle(self, key: tuple[str, str, str], rev: Revision) -> None:
        self._emit_logs(rev, float("inf"))
        now_iso = rfc3339(rev.settle_s)
        if rev.outcome.ready:
            rev.state = "ready"
            rev.data["conditions"] = [
                {"type": "Ready", "state": "CONDITION_SUCCEEDED", "lastTransitionTime": now_iso},
                {"type": "ContainerHealthy", "state": "CONDITION_SUCCEEDED", "lastTransitionTime": now_iso},
                {"type": "ResourcesAvailable", "state": "CONDITION_SUCCEEDED", "lastTransitionTime": now_iso},
            ]
            if self.app_factory is not None:
                try:
                    rev.app, rev.sim = self.app_factory(rev)
                except Exception:  # a broken serving config must not take the API down
                    logger.exception("cannot build the serving app of %s", rev.short)
        else:
            rev.state = "failed"
            msg = rev.outcome.failure_message or "The revision failed to start."
            rev.data["conditions"] = [
                {
                    "type": "Ready",
                    "state": "CONDITION_FAILED",
                    "message": msg,
                    "lastTransitionTime": now_iso,
                    "severity": "ERROR",
                    "revisionReason": rev.outcome.failure_reason,
                },
                {
                    "type": "ContainerHealthy",
                    "state": "CONDITION_FAILED",
                    "message": msg,
                    "lastTransitionTime": now_iso,
                    "severity": "ERROR",
                    "revisionReason": rev.outcome.failure_reason,
                },
                {"type": "ResourcesAvailable", "state": "CONDITION_SUCCEEDED", "lastTransitionTime": now_iso},
            ]
        rev.data["reconciling"] = False
        rev.data["observedGeneration"] = rev.data.get("generation", "1")
        self._refresh_service(key)
        svc = self.services.get(key)
        for op_name in rev.operations:
            op = self.operations.get(op_name)
            if op is None or op.data.get("done"):
                continue
            op.data["done"] = True
            if svc is not None:
                op.data["metadata"] = {"@type": SERVICE_TYPE, **self._public(svc)}
            if rev.outcome.ready and svc is not None:
                op.data["response"] = {"@type": SERVICE_TYPE, **self._public(svc)}
            else:
                op.data["error"] = {
                    "code": OP_ERROR_CODE,
                    "message": f"Revision '{rev.short}' is not ready and cannot serve traffic. "
                    f"{rev.outcome.failure_message or ''}".strip(),
                }

    # ------------------------------------------------------------------------------ services
    def _public(self, svc: dict[str, Any]) -> dict[str, Any]:
        return {k: copy.deepcopy(v) for k, v in svc.items() if not k.startswith("_")}

    def get_service(self, project: str, location: str, service: str) -> dict[str, Any]:
        self.advance()
        with self.lock:
            return self._public(self._get_service(project, location, service))

    def list_services(self, project: str, location: str) -> list[dict[str, Any]]:
        self.advance()
        with self.lock:
            return [
                self._public(s)
                for (p, loc, _), s in sorted(self.services.items())
                if p == project and (location == "-" or loc == location)
            ]

    def _new_operation(
        self,
        project: str,
        location: str,
        key: tuple[str, str, str] | None,
        metadata: dict[str, Any],
        metadata_type: str = SERVICE_TYPE,
    ) -> Operation:
        name = f"projects/{project}/locations/{location}/operations/{uuid.uuid4()}"
        op = Operation(
            name=name,
            data={"name": name, "metadata": {"@type": metadata_type, **metadata}, "done": False},
            service_key=key,
        )
        self.operations[name] = op
        return op

    def create_service(
        self,
        project: str,
        location: str,
        service_id: str,
        body: Any,
        *,
        validate_only: bool = False,
        creator: str = "sandbox-user@example.com",
    ) -> dict[str, Any]:
        import re

        if not service_id:
            raise bad_request("serviceId: Required", "service_id")
        if not re.fullmatch(r"[a-z]([-a-z0-9]{0,47}[a-z0-9])?", service_id):
            raise bad_request(
                f"serviceId: Invalid value '{service_id}': must use only lowercase letters, digits and "
                "hyphens, start with a letter, not end with a hyphen, and be at most 49 characters",
                "service_id",
            )
        data = validate_service_json(body)
        self.advance()
        with self.lock:
            key = (project, location, service_id)
            if key in self.services:
                raise ApiError(
                    "ALREADY_EXISTS",
                    f"Resource 'projects/{project}/locations/{location}/services/{service_id}' "
                    "already exists.",
                )
            return self._create_locked(key, data, validate_only=validate_only, creator=creator)

    _USER_FIELDS = (
        "description", "labels", "annotations", "client", "clientVersion", "ingress", "launchStage",
        "binaryAuthorization", "template", "traffic", "scaling", "invokerIamDisabled", "defaultUriDisabled",
        "customAudiences", "buildConfig", "iapEnabled", "multiRegionSettings", "threatDetectionEnabled",
    )  # fmt: skip

    def _create_locked(
        self, key: tuple[str, str, str], data: dict[str, Any], *, validate_only: bool, creator: str
    ) -> dict[str, Any]:
        project, location, service_id = key
        template = self._default_template(data.get("template") or {})
        self._validate_template(template)
        self._check_revision_name(key, template)
        name = f"projects/{project}/locations/{location}/services/{service_id}"
        now = self._now()
        svc: dict[str, Any] = {k: copy.deepcopy(data[k]) for k in self._USER_FIELDS if k in data}
        svc.update(
            {
                "name": name,
                "uid": str(uuid.uuid4()),
                "generation": "1",
                "createTime": rfc3339(now),
                "updateTime": rfc3339(now),
                "creator": creator,
                "lastModifier": creator,
                "ingress": data.get("ingress", "INGRESS_TRAFFIC_ALL"),
                "launchStage": data.get("launchStage", "GA"),
                "template": template,
                "traffic": data.get("traffic")
                or [{"type": "TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST", "percent": 100}],
                "uri": self.service_uri(project, location, service_id),
                "urls": [self.service_uri(project, location, service_id)],
            }
        )
        self._validate_traffic(key, svc["traffic"], template.get("revision"))
        if validate_only:
            op_name = f"projects/{project}/locations/{location}/operations/{uuid.uuid4()}"
            svc["etag"] = self._etag(svc)
            return {
                "name": op_name,
                "metadata": {"@type": SERVICE_TYPE, **svc},
                "done": True,
                "response": {"@type": SERVICE_TYPE, **svc},
            }
        self.services[key] = svc
        self.revisions.setdefault(key, {})
        op = self._new_operation(project, location, key, {})
        self._start_revision(key, svc, op, creator)
        svc["etag"] = self._etag(svc)
        self._refresh_service(key)
        op.data["metadata"] = {"@type": SERVICE_TYPE, **self._public(svc)}
        return copy.deepcopy(op.data)

    def _start_revision(
        self, key: tuple[str, str, str], svc: dict[str, Any], op: Operation, creator: str
    ) -> Revision:
        project, location, service_id = key
        gen = int(svc.get("generation", "1"))
        template = svc["template"]
        self._check_revision_name(key, template)
        short = template.get("revision") or self._revision_name(service_id, gen)
        now = self._now()
        rt = {k: copy.deepcopy(v) for k, v in template.items() if k != "revision"}
        data: dict[str, Any] = {
            "name": f"projects/{project}/locations/{location}/services/{service_id}/revisions/{short}",
            "uid": str(uuid.uuid4()),
            "generation": "1",
            "labels": rt.pop("labels", {}) or {},
            "annotations": rt.pop("annotations", {}) or {},
            "createTime": rfc3339(now),
            "updateTime": rfc3339(now),
            "launchStage": svc.get("launchStage", "GA"),
            "service": svc["name"],
            "serviceAccount": rt.pop("serviceAccount", None)
            or "sandbox-compute@developer.gserviceaccount.com",
            "reconciling": True,
            "conditions": [
                {"type": "Ready", "state": "CONDITION_RECONCILING", "lastTransitionTime": rfc3339(now)},
            ],
            "logUri": f"https://console.cloud.google.com/logs/viewer?project={project}&resource=cloud_run_revision/service_name/{service_id}/revision_name/{short}",
            "creator": creator,
            "scalingStatus": {
                "desiredMinInstanceCount": int((rt.get("scaling") or {}).get("minInstanceCount", 0))
            },
        }
        rt.pop("healthCheckDisabled", None)
        data.update(rt)
        data["labels"].setdefault("serving.knative.dev/service", service_id)
        data["etag"] = hashlib.sha256(data["uid"].encode()).hexdigest()[:24]
        ctx = RevisionContext(
            project=project,
            location=location,
            service=service_id,
            revision=short,
            template=copy.deepcopy(template),
            time_scale=self.clock.time_scale,
            zero_latency=self.zero_latency,
            created_s=now,
        )
        try:
            outcome = self.physics(ctx)
        except Exception as e:  # the physics must never take the API down: fail the revision instead
            logger.exception("physics failed for %s", short)
            outcome = StartupOutcome(
                ready=False,
                duration_s=5.0,
                failure_message=f"The sandbox could not simulate this revision: {e}",
                category="unknown",
            )
        rev = Revision(
            project=project,
            location=location,
            service=service_id,
            short=short,
            data=data,
            created_s=now,
            outcome=outcome,
            operations=[op.name],
        )
        op.revision = short
        self.revisions[key][short] = rev
        self.clock.fast_until(rev.settle_s)
        svc["latestCreatedRevision"] = rev.name
        svc["template"]["revision"] = template.get("revision", "") or ""
        if not svc["template"]["revision"]:
            svc["template"].pop("revision")
        if outcome.duration_s <= 0:
            self._settle(key, rev)
        return rev

    def update_service(
        self,
        project: str,
        location: str,
        service: str,
        body: Any,
        *,
        update_mask: str | None = None,
        validate_only: bool = False,
        allow_missing: bool = False,
        creator: str = "sandbox-user@example.com",
    ) -> dict[str, Any]:
        data = validate_service_json(body)
        self.advance()
        with self.lock:
            key = (project, location, service)
            if key not in self.services:
                if allow_missing:
                    return self._create_locked(key, data, validate_only=validate_only, creator=creator)
                raise not_found(
                    f"Resource 'projects/{project}/locations/{location}/services/{service}' was not found"
                )
            cur = self.services[key]
            _check_etag(
                data.get("etag"),
                cur,
                f"service 'projects/{project}/locations/{location}/services/{service}'",
                " Read the service again and retry.",
            )
            new = self._merge(cur, data, update_mask)
            new_template = self._default_template(new.get("template") or {})
            self._validate_template(new_template)
            # a new revision only when the template changed (sending the same one back, e.g. to move
            # traffic, creates none, as on Cloud Run)
            template_changed = new_template != cur["template"]
            if template_changed:
                self._check_revision_name(key, new_template)
            new["template"] = new_template
            gen = int(cur.get("generation", "1")) + 1
            latest_name = None
            if template_changed:
                latest_name = new_template.get("revision")
            self._validate_traffic(key, new.get("traffic") or [], latest_name)
            if validate_only:
                preview = {**self._public(cur), **{k: v for k, v in new.items() if not k.startswith("_")}}
                op_name = f"projects/{project}/locations/{location}/operations/{uuid.uuid4()}"
                return {
                    "name": op_name,
                    "metadata": {"@type": SERVICE_TYPE, **preview},
                    "done": True,
                    "response": {"@type": SERVICE_TYPE, **preview},
                }
            for k in self._USER_FIELDS:
                if k in new:
                    cur[k] = new[k]
                else:
                    cur.pop(k, None)
            if not cur.get("traffic"):
                cur["traffic"] = [{"type": "TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST", "percent": 100}]
            now = self._now()
            cur["generation"] = str(gen)
            cur["updateTime"] = rfc3339(now)
            cur["lastModifier"] = creator
            op = self._new_operation(project, location, key, {})
            if template_changed:
                self._start_revision(key, cur, op, creator)
            cur["etag"] = self._etag(cur)
            self._refresh_service(key)
            op.data["metadata"] = {"@type": SERVICE_TYPE, **self._public(cur)}
            if not template_changed:
                op.data["done"] = True
                op.data["response"] = {"@type": SERVICE_TYPE, **self._public(cur)}
            return copy.deepcopy(op.data)

    def _merge(self, cur: dict[str, Any], data: dict[str, Any], update_mask: str | None) -> dict[str, Any]:
        base = {k: copy.deepcopy(cur[k]) for k in self._USER_FIELDS if k in cur}
        if not update_mask or update_mask.strip() in ("*",):
            return {k: copy.deepcopy(data[k]) for k in self._USER_FIELDS if k in data}
        from google.protobuf import field_mask_pb2

        paths = [p.strip() for p in update_mask.split(",") if p.strip()]
        cur_msg = _proto("Service")
        new_msg = _proto("Service")
        json_format.ParseDict(base, cur_msg)
        json_format.ParseDict({k: v for k, v in data.items() if k in self._USER_FIELDS}, new_msg)
        mask = field_mask_pb2.FieldMask(paths=[_snake(p) for p in paths])
        if not mask.IsValidForDescriptor(cur_msg.DESCRIPTOR):
            raise bad_request(
                f"updateMask: invalid field path(s) {update_mask!r} for google.cloud.run.v2.Service",
                "update_mask",
            )
        mask.MergeMessage(new_msg, cur_msg, replace_message_field=True, replace_repeated_field=True)
        merged = json_format.MessageToDict(cur_msg, preserving_proto_field_name=False)
        return {k: merged[k] for k in self._USER_FIELDS if k in merged}

    def delete_service(
        self, project: str, location: str, service: str, *, options: DeleteOptions = DeleteOptions()
    ) -> dict[str, Any]:
        self.advance()
        with self.lock:
            key = (project, location, service)
            svc = self._get_service(project, location, service)
            _check_etag(options.etag, svc, f"service '{svc['name']}'")
            op = self._deletion(key, SERVICE_TYPE, self._public(svc), options)
            if not options.validate_only:
                del self.services[key]
                self.revisions.pop(key, None)
            return op

    def _deletion(
        self, key: tuple[str, str, str], type_url: str, snapshot: dict[str, Any], options: DeleteOptions
    ) -> dict[str, Any]:
        """The finished long-running operation of a deletion: the resource as it was, with deleteTime;
        kept for operations.get unless the request only validates."""
        project, location, _ = key
        snapshot["deleteTime"] = rfc3339(self._now())
        name = f"projects/{project}/locations/{location}/operations/{uuid.uuid4()}"
        op = {
            "name": name,
            "metadata": {"@type": type_url, **snapshot},
            "done": True,
            "response": {"@type": type_url, **snapshot},
        }
        if not options.validate_only:
            self.operations[name] = Operation(name=name, data=op, service_key=key)
        return copy.deepcopy(op)

    # ------------------------------------------------------------------------------ revisions
    def _rev_public(self, rev: Revision) -> dict[str, Any]:
        return copy.deepcopy(rev.data)

    def list_revisions(self, project: str, location: str, service: str) -> list[dict[str, Any]]:
        self.advance()
        with self.lock:
            key = (project, location, service)
            if key not in self.services:
                raise not_found(
                    f"Resource 'projects/{project}/locations/{location}/services/{service}' was not found"
                )
            revs = sorted(self.revisions.get(key, {}).values(), key=lambda r: r.created_s, reverse=True)
            return [self._rev_public(r) for r in revs]

    def _get_revision(self, project: str, location: str, service: str, revision: str) -> Revision:
        rev = self.revisions.get((project, location, service), {}).get(revision)
        if rev is None:
            raise not_found(
                f"Resource 'projects/{project}/locations/{location}/services/{service}/revisions/{revision}' "
                "was not found"
            )
        return rev

    def get_revision(self, project: str, location: str, service: str, revision: str) -> dict[str, Any]:
        self.advance()
        with self.lock:
            return self._rev_public(self._get_revision(project, location, service, revision))

    def serving_revisions(self, key: tuple[str, str, str]) -> list[tuple[str, int]]:
        """(revision short name, percent) actually receiving traffic (LATEST -> latest ready)."""
        svc = self.services.get(key)
        if svc is None:
            return []
        ready = svc.get("latestReadyRevision", "").rsplit("/", 1)[-1]
        out: dict[str, int] = {}
        for t in svc.get("traffic") or []:
            pct = int(t.get("percent", 0))
            if pct <= 0:
                continue
            if t.get("type") == "TRAFFIC_TARGET_ALLOCATION_TYPE_LATEST":
                if ready:
                    out[ready] = out.get(ready, 0) + pct
            else:
                r = self.revisions.get(key, {}).get(t.get("revision", ""))
                if r is not None and r.state == "ready":
                    out[r.short] = out.get(r.short, 0) + pct
        return list(out.items())

    def delete_revision(
        self,
        project: str,
        location: str,
        service: str,
        revision: str,
        *,
        options: DeleteOptions = DeleteOptions(),
    ) -> dict[str, Any]:
        self.advance()
        with self.lock:
            key = (project, location, service)
            rev = self._get_revision(project, location, service, revision)
            _check_etag(options.etag, rev.data, f"revision '{revision}'")
            if revision in dict(self.serving_revisions(key)) or any(
                t.get("revision") == revision for t in self.services[key].get("traffic", [])
            ):
                raise ApiError(
                    "FAILED_PRECONDITION",
                    f"Revision '{revision}' is receiving traffic and cannot be deleted. "
                    "Migrate its traffic to another revision first.",
                )
            op = self._deletion(key, REVISION_TYPE, self._rev_public(rev), options)
            if options.validate_only:
                return op
            del self.revisions[key][revision]
            if self.services[key].get("latestCreatedRevision", "").endswith("/" + revision):
                remaining = sorted(self.revisions[key].values(), key=lambda r: r.created_s)
                if remaining:
                    self.services[key]["latestCreatedRevision"] = remaining[-1].name
            self._refresh_service(key)
            return op

    # ------------------------------------------------------------------------------ operations
    def get_operation(self, project: str, location: str, op_id: str) -> dict[str, Any]:
        self.advance()
        with self.lock:
            name = f"projects/{project}/locations/{location}/operations/{op_id}"
            op = self.operations.get(name)
            if op is None:
                raise not_found(f"Resource '{name}' was not found")
            return copy.deepcopy(op.data)

    def list_operations(self, project: str, location: str) -> list[dict[str, Any]]:
        self.advance()
        with self.lock:
            prefix = f"projects/{project}/locations/{location}/operations/"
            return [copy.deepcopy(o.data) for n, o in self.operations.items() if n.startswith(prefix)]

    def delete_operation(self, project: str, location: str, op_id: str) -> None:
        with self.lock:
            name = f"projects/{project}/locations/{location}/operations/{op_id}"
            if self.operations.pop(name, None) is None:
                raise not_found(f"Resource '{name}' was not found")

    # ------------------------------------------------------------------------------ serving
    def pick_revision(self, project: str, location: str, service: str) -> Revision | None:
        """The ready revision a request to the service URL goes to (weighted round robin, so each
        revision gets its percent of every hundred requests); for a tag's URL (``TAG---SERVICE``), the
        tagged revision, whatever its percent."""
        self.advance()
        with self.lock:
            if TAG_SEP in service:
                return self._tagged(project, location, *service.split(TAG_SEP, 1))
            key = (project, location, service)
            targets = self.serving_revisions(key)
            if not targets:
                return None
            n = self._rr.get(key, 0)
            self._rr[key] = n + 1
            slot = n % 100
            acc = 0
            for short, pct in targets:
                acc += pct
                if slot < acc:
                    return self.revisions[key][short]
            return self.revisions[key][targets[-1][0]]

    def _tagged(self, project: str, location: str, tag: str, service: str) -> Revision | None:
        key = (project, location, service)
        svc = self.services.get(key)
        if svc is None:
            return None
        for t in svc.get("traffic") or []:
            if t.get("tag") != tag:
                continue
            short = t.get("revision") or svc.get("latestReadyRevision", "").rsplit("/", 1)[-1]
            rev = self.revisions.get(key, {}).get(short)
            return rev if rev is not None and rev.state == "ready" else None
        return None

    def find_revision(self, project: str, location: str, revision: str) -> Revision | None:
        self.advance()
        with self.lock:
            for (p, loc, _), revs in self.revisions.items():
                if p == project and loc == location and revision in revs:
                    return revs[revision]
        return None

    def dump(self) -> str:
        with self.lock:
            return json.dumps({"/".join(k): self._public(v) for k, v in self.services.items()}, indent=1)
