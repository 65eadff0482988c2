"""``gemma-sre serve --fleet`` beside ``watch --fleet`` replicas: the walk-through of docs/walkthrough.md,
end to end, in one process (the process boundaries are tested elsewhere: test_agent_serve,
test_agent_fleet_postgres).

A sandbox of several services (``gemma-sre sandbox --service NAME=SCENARIO``), a fleet file, two
watcher replicas, the server reading the same file; a Cloud Monitoring alert (Google's payload shape)
starts an investigation that waits for the service's lease while a replica holds it; a service the
replicas found first is joined, not investigated twice; approvals are Slack callbacks signed with
``agent.serve.sign_callback``; each incident ends with one thread and one report. On the SQLite
default here; on a real Postgres in test_agent_fleet_postgres (``flow``, the same function)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent.serve.app import WAITING_FOR_LEASE
from agent.serve.sign_callback import main as sign_callback
from agent.serve.sign_callback import signed_headers
from mcp_tools.endpoint import tls_context
from mcp_tools.errors import UserError
from sandbox.testing import TEST_TIME_SCALE
from tests.test_agent_fleet import write_fleet
from tests.test_agent_serve import cloud_monitoring
from tests.waiting import wait_until

TOKEN = "serve-token-" + "f" * 20
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"  # the signing secret of Slack's documentation example
SERVICES = [("chat-a", "healthy"), ("chat-b", "reference-weights-oom"), ("chat-c", "reference-weights-oom")]


class Server:
    def __init__(self, url: str) -> None:
        self.url = url

    def alert(self, doc: Any) -> dict[str, Any]:
        r = httpx.post(
            f"{self.url}/alerts/cloud-monitoring",
            json=doc,
            headers={"authorization": f"Bearer {TOKEN}"},
            timeout=30,
            verify=tls_context(),
        )
        assert r.status_code == 202, r.text
        (out,) = r.json()["accepted"]
        return dict(out)

    def investigation(self, service: str) -> dict[str, Any] | None:
        r = httpx.get(
            f"{self.url}/investigations",
            headers={"authorization": f"Bearer {TOKEN}"},
            timeout=30,
            verify=tls_context(),
        )
        found = [i for i in r.json()["investigations"] if i["service"] == service and not i["closed_at"]]
        assert len(found) <= 1, found  # one open investigation per service
        return found[0] if found else None

    def status(self, service: str, *statuses: str, timeout: float = 180) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            inv = self.investigation(service)
            return inv if inv is not None and inv["status"] in statuses else None

        return dict(wait_until(check, f"{service} to be {statuses}", timeout_s=timeout))


@contextmanager
def replicas(path: Path, n: int) -> Iterator[list[Any]]:
    """``n`` ``watch --fleet`` replicas in threads, each with its own connection to the lease store."""
    from agent.fleet import FleetWatcher, load_fleet
    from graph.leases import open_leases
    from mcp_tools.settings import get_settings

    s = get_settings()
    stop = threading.Event()
    reports: list[Any] = []
    with ExitStack() as stack:
        threads = []
        for i in range(n):
            store = stack.enter_context(open_leases(s.checkpoint_url, s.state_dir))
            fw = FleetWatcher(load_fleet(path), store, holder=f"replica-{i}")
            kw = {"stop": stop, "on_round": reports.append}
            t = threading.Thread(target=fw.run, kwargs=kw, daemon=True)
            t.start()
            threads.append(t)
        try:
            yield reports
        finally:
            stop.set()
            for t in threads:
                t.join(60)


def flow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Any) -> None:
    from agent.commands.sandbox import start
    from agent.commands.serve import make_serve
    from agent.fleet import LeasedTrackerStore, load_fleet
    from agent.serve.app import build_app
    from graph.leases import open_leases
    from graph.runner import thread_result
    from mcp_tools.settings import get_settings
    from sandbox.serve import start_in_thread

    monkeypatch.setenv("GEMMA_SRE_SERVE_TOKEN", TOKEN)
    monkeypatch.setenv("GEMMA_SRE_SLACK_SIGNING_SECRET", SECRET)  # callbacks only: no Slack workspace
    get_settings.cache_clear()
    s = get_settings()
    sb = start(
        dict(
            scenario=None,
            incident=None,
            port=0,
            host="127.0.0.1",
            time_scale=TEST_TIME_SCALE,
            zero_latency=True,
            project="team-a",
            location="us-central1",
            services=SERVICES,
        )
    )
    names = [n for n, _ in SERVICES]
    path = write_fleet(tmp_path / "fleet.toml", sb, names, workers=2, interval="10s", lease="3s")
    fleet = load_fleet(path)
    with ExitStack() as stack:
        stack.callback(sb.stop)
        leases = stack.enter_context(open_leases(s.checkpoint_url, s.state_dir))
        srv, token = make_serve(fleet=fleet, leases=leases)
        stack.callback(srv.close)
        url, stop_server = start_in_thread(build_app(srv, token))
        stack.callback(stop_server)
        server = Server(url)
        keys = {cfg.service: key for key, cfg in fleet.keyed().items()}

        # 1. A replica holds chat-b's lease: the alert's investigation waits for it, and runs after.
        held = leases.acquire(keys["chat-b"], "a-watcher-replica", ttl_s=60)
        assert held is not None
        started = server.alert(cloud_monitoring(sb, "chat-b", "0.b1", "open"))
        assert started["action"] == "started"
        thread_b = started["thread_id"]
        server.status("chat-b", WAITING_FOR_LEASE)
        with pytest.raises(UserError):
            thread_result(thread_b, state_dir=s.state_dir)  # not a step of its cycle yet
        released_at = time.time()
        leases.release(held)
        inv = server.status("chat-b", "awaiting_approval")
        assert inv["thread_id"] == thread_b
        first = thread_result(thread_b, state_dir=s.state_dir).values["timeline"][0]["at"]
        assert _epoch(first) >= released_at - 0.001, (first, released_at)  # the timeline's milliseconds

        with replicas(path, 2) as rounds:
            # 2. chat-c: the replicas find it and open a thread for it; its alert joins that thread.
            def watchers_thread() -> str | None:
                state = LeasedTrackerStore(leases, keys["chat-c"]).load()
                return state.pending_thread

            thread_c = wait_until(watchers_thread, "the replicas to plan chat-c", timeout_s=180)
            joined = server.alert(cloud_monitoring(sb, "chat-c", "0.c1", "open"))
            assert joined["action"] == "joined" and joined["thread_id"] == thread_c, joined
            assert server.status("chat-c", "awaiting_approval")["thread_id"] == thread_c
            # ... and chat-b's plan, which the replicas found waiting, was not planned again.
            assert LeasedTrackerStore(leases, keys["chat-b"]).load().pending_thread == thread_b

            # 3. Approve chat-b and reject chat-c with signed Slack callbacks.
            slack = f"{url}/slack/interactions"
            assert sign_callback([thread_b, "--url", slack, "--user", "U0ALICE"]) == 0
            assert sign_callback([thread_c, "--url", slack, "--user", "U0ALICE", "--reject"]) == 0
            assert server.status("chat-b", "fixed", "rolled_back", "failed")["status"] == "fixed"
            server.status("chat-c", "rejected")
            # A replica's round after the fix records the thread's outcome on the incident.
            fixed_at = leases.now()

            def watched_after_fix() -> bool:
                return any(r.service_key == keys["chat-b"] and r.started_at > fixed_at for r in leases.runs())

            wait_until(watched_after_fix, "a round of chat-b after the fix", timeout_s=180)
            # that round has started; a round is reported when it ends (on a busy machine the replicas
            # may not have reported two yet)
            wait_until(lambda: len(rounds) >= 2, "two rounds reported", timeout_s=180)
            n_rounds = len(rounds)
        state_b = LeasedTrackerStore(leases, keys["chat-b"]).load()
        assert state_b.pending_thread is None
        assert [(i.thread_id, i.outcome) for i in state_b.incidents.values()] == [(thread_b, "fixed")]
        assert n_rounds >= 2 and not [r for r in leases.runs() if r.status == "failed"]

    # One incident, one thread, one report; nothing for the healthy service; one change sent.
    for service, thread, outcome in (("chat-b", thread_b, "fixed"), ("chat-c", thread_c, "rejected")):
        res = cli("incidents", "--service", service, "--json")
        assert res.returncode == 0, res.stderr
        rows = json.loads(res.stdout)["incidents"]
        assert [(r["thread_id"], r["outcome"]) for r in rows] == [(thread, outcome)], rows
    assert json.loads(cli("incidents", "--service", "chat-a", "--json").stdout)["incidents"] == []
    writes = [e for e in sb.journal.entries() if e.method in ("POST", "PATCH", "PUT", "DELETE")]
    assert [e.resource.rsplit("/", 1)[1] for e in writes] == ["chat-b"]


def _epoch(iso: str) -> float:
    from datetime import datetime

    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


@pytest.mark.slow  # a sandbox, two replicas, a server and a fix verified
def test_walkthrough_on_sqlite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli: Any) -> None:
    flow(tmp_path, monkeypatch, cli)


def test_sign_callback_signs_as_slack_documents_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # Slack's documented example request (docs.slack.dev, "Verifying requests from Slack").
    body = (
        "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V"
        "&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text="
        "&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN"
        "&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
    )
    headers = signed_headers(SECRET, body, timestamp=1531420618)
    expected = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
    assert headers["x-slack-signature"] == expected
    assert headers["x-slack-request-timestamp"] == "1531420618"


def test_sign_callback_bad_input_is_one_line_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert sign_callback(["gemma-4-12b-0123456789"]) == 2  # no signing secret in the environment
    err = capsys.readouterr().err
    assert "GEMMA_SRE_SLACK_SIGNING_SECRET is not set" in err and len(err.strip().splitlines()) == 1
    monkeypatch.setenv("GEMMA_SRE_SLACK_SIGNING_SECRET", SECRET)
    assert sign_callback(["gemma-4-12b-0123456789", "--option", "0"]) == 2  # options count from 1
    assert "option" in capsys.readouterr().err
    assert sign_callback(["gemma-4-12b-0123456789", "--curl"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("curl -sS -X POST http://127.0.0.1:8780/slack/interactions") and SECRET not in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["serve", "--fleet", "no-such.toml"], "no such file"),
        (["serve", "--fleet", "FLEET", "--service", "chat-a"], "--service is set per service in the fleet"),
        (["sandbox", "--service", "chat-a"], "expected NAME=SCENARIO"),
        (["sandbox", "--service", "chat-a=nonsense"], "unknown scenario 'nonsense'"),
        (["sandbox", "--service", "Chat_A=healthy"], "--service 'Chat_A=healthy'"),
        (["sandbox", "--service", "a=healthy", "--service", "a=kv-starvation"], "a name is given twice"),
    ],
)
def test_bad_fleet_serve_and_sandbox_input_is_one_line_exit_2(
    cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    monkeypatch.setenv("GEMMA_SRE_SERVE_TOKEN", TOKEN)
    fleet = tmp_path / "fleet.toml"
    fleet.write_text("[[services]]\nservice = 'chat-a'\n", encoding="utf-8")
    res = cli(*[str(fleet) if a == "FLEET" else a for a in args])
    assert res.returncode == 2, res
    assert message in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
