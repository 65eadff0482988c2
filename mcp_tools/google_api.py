"""Every Google API call goes through here: one client builder, one call wrapper, one error map.

- ``build_client(cls, settings, endpoint=...)`` makes any Google client (Cloud Run, Logging,
  Storage, Secret Manager, Cloud Quotas, Vertex AI, Cloud Monitoring, ...): REST transport, the
  endpoint override for the sandbox (``client_options``), anonymous credentials when the settings ask
  for them, and for the hand-written clients (Logging, Storage), whose calls take no timeout, an HTTP
  session that bounds every request.
- ``call(what, fn, policy=...)`` runs ``fn`` (one API call, or a listing with its pages) under a
  ``CallPolicy``: a bounded number of attempts with exponential backoff on one set of transient
  failures, a timeout per attempt. The library's own retry is switched off (``policy.rpc``), so a
  call is tried ``policy.attempts`` times in all, never retries inside retries.
- ``ApiReader``: the base of the classes that read one Google API (Cloud Run, Logging, Monitoring):
  the settings, the call policy (reads time out after the settings' ``http_timeout_s``), the project,
  and each client built on first use.
- A ``Deadline`` (optional, on the policy): the time one piece of work (a loop's cycle) has in all.
  Each attempt's timeout is the smaller of ``timeout_s`` and what is left of it, no attempt starts
  and no backoff sleeps past it, and a call it cuts short raises ``DeadlineExceeded``: a hung
  dependency costs at most the time left, never ``attempts`` times ``timeout_s``.
- One error map: 404 is ``NotFoundError``; 401/403 and credential problems are ``AuthError``; a
  rejected request (400, 409) is ``UserError``; anything else, and a transient failure that outlived
  its attempts, is ``ExternalError``. Each is one line that names the call.

Mutations use ``MUTATION``: only failures that prove the request was not processed (429, 503, a
connect timeout) are retried, so a retried change cannot be made twice.

Nothing here imports a Google library at module import time: the CLI and the MCP server start fast.
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from mcp_tools.errors import AuthError, ExternalError, NotFoundError, UserError, short_error
from mcp_tools.settings import Settings, get_settings

log = logging.getLogger(__name__)

T = TypeVar("T")

NO_CREDENTIALS = (
    "no Google credentials found: run `gcloud auth application-default login` "
    "or set GOOGLE_APPLICATION_CREDENTIALS"
)


class DeadlineExceeded(ExternalError):
    """The work's overall deadline ran out before (or while) a call was made: it was not waited for."""


#: Below this many seconds left, an attempt is not started: it could not finish anyway.
MIN_ATTEMPT_S = 0.05


@dataclass(frozen=True)
class Deadline:
    """A point in (monotonic) time that a whole piece of work must end by, and its total budget."""

    total_s: float
    at: float = field(default=-1.0)

    def __post_init__(self) -> None:
        if self.at < 0:
            object.__setattr__(self, "at", time.monotonic() + self.total_s)

    @classmethod
    def until(cls, at: float, total_s: float) -> Deadline:
        return cls(total_s=total_s, at=at)

    def remaining(self) -> float:
        return max(0.0, self.at - time.monotonic())

    @property
    def expired(self) -> bool:
        return self.remaining() < MIN_ATTEMPT_S

    def check(self, what: str) -> float:
        """The seconds left; ``DeadlineExceeded`` when there are none."""
        left = self.remaining()
        if left < MIN_ATTEMPT_S:
            raise DeadlineExceeded(f"{what}: not tried, the deadline of {self.total_s:g} s ran out")
        return left


@dataclass(frozen=True)
class CallPolicy:
    """How one call is tried: ``attempts`` in all, backoff between them, ``timeout_s`` per attempt,
    and all of it inside ``deadline`` when there is one."""

    attempts: int = 3
    base_delay_s: float = 0.5
    max_delay_s: float = 4.0
    timeout_s: float = 30.0
    mutation: bool = False
    deadline: Deadline | None = None

    def with_(self, **changes: Any) -> CallPolicy:
        return replace(self, **changes)

    def attempt_timeout(self, what: str = "call") -> float:
        """This attempt's timeout: ``timeout_s``, or less when the deadline is nearer."""
        if self.deadline is None:
            return self.timeout_s
        return min(self.timeout_s, self.deadline.check(what))

    @property
    def rpc(self) -> dict[str, Any]:
        """Keyword arguments for a generated (GAPIC) client method: our timeout, not its retry.
        Read at each attempt, so each gets what is left of the deadline."""
        return {"retry": None, "timeout": self.attempt_timeout()}


READ = CallPolicy()
MUTATION = CallPolicy(mutation=True)


def transient_errors() -> tuple[type[BaseException], ...]:
    """Failures worth another attempt for a read: 429, 5xx, deadlines, connection problems."""
    import requests
    from google.api_core import exceptions as gexc
    from google.auth import exceptions as auth_exc

    return (
        gexc.TooManyRequests,
        gexc.InternalServerError,
        gexc.BadGateway,
        gexc.ServiceUnavailable,
        gexc.GatewayTimeout,  # includes DeadlineExceeded
        requests.exceptions.ConnectionError,
        requests.exceptions.Timeout,
        auth_exc.TransportError,  # the token endpoint (or metadata server) did not answer
    )


def not_processed_errors() -> tuple[type[BaseException], ...]:
    """Failures that prove a request was not acted on: the only ones a mutation is retried on."""
    import requests
    from google.api_core import exceptions as gexc

    return (gexc.TooManyRequests, gexc.ServiceUnavailable, requests.exceptions.ConnectTimeout)


def retrying(
    fn: Callable[[], T],
    *,
    what: str,
    policy: CallPolicy,
    retry_on: tuple[type[BaseException], ...],
) -> T:
    """``fn()`` tried up to ``policy.attempts`` times while it raises one of ``retry_on``.

    The last failure propagates as it was raised. A ``UserError`` is never retried. Used by ``call``
    for Google APIs, and by the loop for the vLLM endpoint's reads. With ``policy.deadline``, no
    attempt starts and no backoff sleeps past it; a failure it cut short is ``DeadlineExceeded``.
    """
    from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

    attempts = max(1, policy.attempts)
    deadline = policy.deadline
    backoff = wait_exponential(multiplier=policy.base_delay_s, max=policy.max_delay_s)

    def _log(rs: Any) -> None:
        exc = rs.outcome.exception() if rs.outcome else None
        n = rs.attempt_number
        log.warning("%s: %s; retrying (attempt %d of %d)", what, short_error(exc), n, attempts)

    def _wait(rs: Any) -> float:
        w = float(backoff(rs))
        return w if deadline is None else min(w, deadline.remaining())

    def _stop(rs: Any) -> bool:
        return rs.attempt_number >= attempts or (deadline is not None and deadline.expired)

    def _retry(e: BaseException) -> bool:
        return isinstance(e, retry_on) and not isinstance(e, UserError | DeadlineExceeded)

    if deadline is not None:
        deadline.check(what)
    try:
        return Retrying(
            stop=_stop if deadline is not None else stop_after_attempt(attempts),
            wait=_wait,
            retry=retry_if_exception(_retry),
            reraise=True,
            before_sleep=_log,
        )(fn)
    except (UserError, DeadlineExceeded):
        raise
    except Exception as e:
        if deadline is not None and deadline.expired:
            raise DeadlineExceeded(
                f"{what}: the deadline of {deadline.total_s:g} s ran out ({short_error(e)})"
            ) from None
        raise


def call(what: str, fn: Callable[[], T], *, policy: CallPolicy = READ, not_found: str | None = None) -> T:
    """Run one Google API call (``fn`` passes ``**policy.rpc`` to generated clients) under ``policy``.

    ``not_found``: the message for a 404 (default: "<what>: not found").
    """
    from google.api_core import exceptions as gexc
    from google.auth import exceptions as auth_exc

    retry_on = not_processed_errors() if policy.mutation else transient_errors()
    try:
        return retrying(fn, what=what, policy=policy, retry_on=retry_on)
    except (UserError, ExternalError):
        raise
    except gexc.NotFound as e:
        raise NotFoundError(not_found or f"{what}: not found ({short_error(e)})") from None
    except (gexc.Unauthorized, gexc.Forbidden) as e:
        raise AuthError(f"{what}: permission denied ({short_error(e)})") from None
    except auth_exc.DefaultCredentialsError:
        raise AuthError(f"{what}: {NO_CREDENTIALS}") from None
    except (gexc.BadRequest, gexc.Conflict) as e:
        raise UserError(f"{what}: rejected as invalid ({short_error(e)})") from None
    except retry_on as e:
        n = max(1, policy.attempts)
        tried = f" after {n} attempts" if n > 1 else ""
        raise ExternalError(f"{what}: unavailable{tried} ({short_error(e)})") from None
    except auth_exc.GoogleAuthError as e:
        raise AuthError(f"{what}: credentials problem ({short_error(e)})") from None
    except gexc.GoogleAPICallError as e:
        raise ExternalError(f"{what}: {short_error(e)}") from None
    except OSError as e:
        raise ExternalError(f"{what}: could not reach the API ({short_error(e)})") from None


# --- clients ------------------------------------------------------------------------------------------


def credentials(settings: Settings, scopes: Any = None) -> Any:
    """Anonymous credentials when the settings ask for them (tests, the sandbox), else ambient (ADC)."""
    if settings.anonymous_credentials:
        from google.auth.credentials import AnonymousCredentials

        return AnonymousCredentials()
    if scopes is None:
        return None  # the client resolves ADC itself
    import google.auth
    from google.auth import exceptions as auth_exc

    try:
        creds, _ = google.auth.default(scopes=scopes)
    except auth_exc.DefaultCredentialsError:
        raise AuthError(NO_CREDENTIALS) from None
    return creds


def _timeout_session(creds: Any, timeout_s: float, deadline: Deadline | None = None) -> Any:
    """An authorized ``requests`` session whose every request times out after ``timeout_s``, or
    sooner when ``deadline`` is nearer (a request with no time left is not sent)."""
    from google.auth.transport.requests import AuthorizedSession

    class _Session(AuthorizedSession):  # type: ignore[misc]
        def request(self, method: Any, url: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            limit = timeout_s if deadline is None else min(timeout_s, deadline.check(f"{method} {url}"))
            t = kwargs.get("timeout")
            if not isinstance(t, int | float) or t <= 0 or t > limit:
                kwargs["timeout"] = limit
            return super().request(method, url, *args, **kwargs)

    return _Session(creds)


def build_client(
    cls: Any,
    settings: Settings,
    *,
    endpoint: str | None = None,
    handwritten: bool = False,
    timeout_s: float | None = None,
    deadline: Deadline | None = None,
    **kwargs: Any,
) -> Any:
    """An instance of the Google client class ``cls`` for these settings.

    Generated (GAPIC) clients get ``transport="rest"``; their calls carry the timeout (``policy.rpc``).
    A client with no REST transport (Cloud Monitoring's ``MetricServiceClient``) is built with
    ``transport="grpc"``: an ``http://host:port`` endpoint (the sandbox) then gets an insecure channel.
    ``handwritten`` clients (``google.cloud.logging.Client``, ``google.cloud.storage.Client``) take no
    transport and, for Logging, no per-call timeout: they get an HTTP session bounded by
    ``timeout_s`` (default: the settings' ``http_timeout_s``) and by ``deadline``. ``endpoint``
    overrides the API host (the sandbox); ``kwargs`` go to ``cls`` as they are (``project=...``).
    """
    from google.auth import exceptions as auth_exc

    if endpoint:
        kwargs["client_options"] = {"api_endpoint": endpoint}
    try:
        if handwritten:
            creds = credentials(settings, scopes=getattr(cls, "SCOPE", None) or ())
            kwargs.setdefault("credentials", creds)
            kwargs["_http"] = _timeout_session(creds, timeout_s or settings.http_timeout_s, deadline)
        else:
            transport = kwargs.pop("transport", "rest")
            if transport == "grpc" and endpoint and endpoint.startswith("http://"):
                # An emulator (the sandbox) speaks plain-text gRPC: the client's own transport class
                # on an insecure channel (it then ignores credentials, as emulators are reached).
                transport, kwargs["client_options"] = _insecure_grpc(cls, endpoint)
            kwargs["transport"] = transport
            creds = credentials(settings)
            if creds is not None:
                kwargs.setdefault("credentials", creds)
        return cls(**kwargs)
    except auth_exc.DefaultCredentialsError:
        raise AuthError(NO_CREDENTIALS) from None


def _insecure_grpc(cls: Any, endpoint: str) -> tuple[Any, dict[str, str]]:
    """The transport factory and client options for a generated client reaching a plain-text gRPC
    endpoint (``http://host:port``)."""
    import grpc

    target = endpoint.removeprefix("http://").rstrip("/")
    transport_cls = cls.get_transport_class("grpc")

    def _make(**_: Any) -> Any:
        return transport_cls(channel=grpc.insecure_channel(target))

    return _make, {"api_endpoint": target}


class ApiReader:
    """The base of a class that talks to one Google API: its settings, how each read is tried
    (``policy``; a mutation uses the same attempts but retries only what was not processed), and its
    clients, each built once, on first use (``lazy_client``), so constructing one costs nothing."""

    def __init__(self, settings: Settings | None = None, *, policy: CallPolicy | None = None) -> None:
        self.settings = settings or get_settings()
        self.policy = policy or READ.with_(timeout_s=self.settings.http_timeout_s)
        self._clients: dict[str, Any] = {}

    @property
    def project(self) -> str:
        if not self.settings.project:
            raise UserError("no Google Cloud project: set GOOGLE_CLOUD_PROJECT")
        return self.settings.project

    def lazy_client(self, key: str, module: str, cls_name: str, **kwargs: Any) -> Any:
        """The client named ``key``: the first time it is asked for, ``build_client`` makes one of the
        class ``cls_name`` in the Google library ``module`` (imported only then) with ``kwargs``.
        Every call names the project: without one, a clear error before any client is built."""
        client = self._clients.get(key)
        if client is None and self.project:
            cls = getattr(importlib.import_module(module), cls_name)
            client = self._clients[key] = build_client(cls, self.settings, **kwargs)
        return client

    def drop_clients(self) -> list[Any]:
        """Forget every client built so far (the next call builds new ones): the clients, to close."""
        dropped = list(self._clients.values())
        self._clients.clear()
        return dropped
