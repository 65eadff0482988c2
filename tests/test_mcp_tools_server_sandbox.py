"""The MCP server against the sandbox: every Cloud Run / Logging / extras tool through the official MCP
client over stdio, and the two-step mutation flow checked in the sandbox's journal.

One sandbox, one extras emulator, one scripted model server and one MCP server process for the module.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from mcp.client.stdio import stdio_client

from mcp_tools.incident import ServiceSpec
from sandbox.extras import (
    ExtrasState,
    create_extras_app,
    seed_model_folder,
    seed_run_gpu_quotas,
    vertex_model,
)
from sandbox.serve import start_in_thread
from sandbox.server import Sandbox, start_sandbox
from sandbox.testing import TEST_TIME_SCALE, sandbox_env
from tests.mcp_client import SessionThread, server_env, stdio_params, text_of
from tests.scripted_openai import REPLY, ScriptedOpenAI

SERVICE = "gemma-4-12b"  # scenario: revision 1 Ready (QAT), revision 2 failed (bf16 weights OOM)
HEALTHY = "gemma-ok"
SECRET_LINE = "loading with Authorization: Bearer ya29.a0AfB_verysecrettokenvalue1234567890"
FAKE_HF = "hf_" + "ZyXwVuTsRqPoNmLkJiHgFeDcBa9876543210"
CONFIRM_TTL_S = 3.0
# secrets set as plain env vars on a service (a bad practice the tools must not amplify)
ENV_SECRETS = {"HF_TOKEN": "hf_" + "PlainEnvTokenValue0123456789ab", "DB_PASSWORD": "correct-horse-battery"}


@dataclass
class World:
    sb: Sandbox
    extras: ExtrasState
    model_script: ScriptedOpenAI
    model_url: str
    client: SessionThread
    extras_url: str


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    sb = start_sandbox(
        scenario="weights-oom-with-good-revision", time_scale=TEST_TIME_SCALE, zero_latency=True
    )
    extras = ExtrasState()
    extras_url, stop_extras = start_in_thread(create_extras_app(extras))
    try:
        # a second, healthy service for the scaling / rollback flows
        qat = "--model=/mnt/models/gemma-4-12B-it-qat-w4a16-ct"
        sb.deploy(
            ServiceSpec(
                name=HEALTHY,
                gpu_type="nvidia-l4",
                cpu=8,
                memory="32Gi",
                image="vllm/vllm-openai:v0.11.0",
                args=[qat, "--max-model-len=8192", "--port=8080"],
                env=ENV_SECRETS,
                max_instances=1,
                concurrency=4,
            ),
            wait=True,
        )
        seed_run_gpu_quotas(extras, sb.project)
        seed_model_folder(
            extras, "models-bucket", "models/gemma-4-12B-it", config={"architectures": ["Gemma3ForCausalLM"]}
        )
        extras.add_vertex_model(
            sb.project, "us-central1", vertex_model(sb.project, "us-central1", "123", "gemma-4-12b-it")
        )
        env = {
            **sandbox_env(sb),
            **{
                f"GEMMA_SRE_{n}_API_ENDPOINT": extras_url
                for n in ("STORAGE", "SECRETMANAGER", "QUOTAS", "AIPLATFORM")
            },
            "GEMMA_SRE_MCP_CONFIRM_TTL_S": str(CONFIRM_TTL_S),
            "HF_TOKEN": FAKE_HF,
        }
        with ScriptedOpenAI() as script:
            model_url = script.root
            env["GEMMA_SRE_MODEL_URL"] = model_url  # the model that analyses logs
            st = SessionThread(
                lambda: stdio_client(stdio_params(server_env(env, tmp_path_factory.mktemp("s"))))
            )
            try:
                yield World(sb, extras, script, model_url, st, extras_url)
            finally:
                st.close()
    finally:
        stop_extras()
        sb.stop()


#: Back to the sandbox's start, however long the module has run: its clock runs TEST_TIME_SCALE times
#: faster than the wall's, so at a busy machine's pace "6h" had already scrolled the first failure out.
WHOLE_LIFE = "7d"


def ok(r: Any) -> dict[str, Any]:
    assert not r.isError, text_of(r)
    assert r.structuredContent is not None
    return dict(r.structuredContent)


# --- reading --------------------------------------------------------------------------------------------


def test_status_and_revisions(world: World) -> None:
    st = ok(world.client.call("status_vllm", {"service_name": SERVICE}))["service"]
    assert st["name"] == SERVICE and st["latest_ready_revision"] != st["latest_created_revision"]
    assert st["terminal_condition"]["state"] == "CONDITION_FAILED"
    assert len(st["revisions"]) == 2
    text = text_of(world.client.call("status_vllm", {"service_name": SERVICE}))
    assert "NOT ready" in text and "failed to start" in text
    listed = world.client.call("list_revisions", {"service_name": SERVICE})
    revs = ok(listed)["revisions"]
    assert sorted(r["ready"] for r in revs) == [False, True]
    assert "failed to start" in text_of(listed)  # the failed revision's condition, under its line
    one = ok(world.client.call("list_revisions", {"service_name": SERVICE, "limit": 1}))
    assert len(one["revisions"]) == 1 and "limit" in one["more"]


def test_secrets_in_a_service_env_never_leave_through_a_tool(world: World) -> None:
    for tool in ("status_vllm", "list_revisions", "get_model_details", "get_system_status"):
        r = world.client.call(tool, {"service_name": HEALTHY})
        assert not r.isError, text_of(r)
        seen = text_of(r) + repr(r.structuredContent)
        for secret in ENV_SECRETS.values():
            assert secret not in seen, f"{tool} leaked a secret from the service env"
    st = ok(world.client.call("status_vllm", {"service_name": HEALTHY}))["service"]
    assert st["spec"]["env"] == {"HF_TOKEN": "[REDACTED]", "DB_PASSWORD": "[REDACTED]"}


def test_unknown_service(world: World) -> None:
    r = world.client.call("status_vllm", {"service_name": "no-such-service"})
    assert r.isError and "not found" in text_of(r)


def test_endpoint_health_metrics_and_queries_via_cloud_run_url(world: World) -> None:
    e = ok(world.client.call("get_vllm_endpoint", {"service_name": SERVICE}))
    assert e["source"] == "cloud_run" and e["url"].startswith(world.sb.url)
    assert ok(world.client.call("get_endpoint", {"service_name": SERVICE}))["url"] == e["url"]
    s = ok(world.client.call("get_system_status", {"service_name": SERVICE}))
    assert s["healthy"] is True and s["ready"] is False and s["failing_conditions"]
    # the terminal condition first, then the others, each "type: message"
    assert [c.split(":")[0] for c in s["failing_conditions"]] == ["Ready", "ConfigurationsReady"]
    assert all("failed to start" in c for c in s["failing_conditions"])
    assert s["serving_revision"] == s["latest_ready_revision"]
    h = ok(world.client.call("verify_model_health", {"service_name": SERVICE}))
    assert h["healthy"] and h["smoke_test_ok"] and h["models"]
    d = ok(world.client.call("get_model_details", {"service_name": SERVICE}))
    assert d["served_models"] and d["gpu_type"] == "nvidia-l4" and d["max_model_len"] == 16384
    m = ok(world.client.call("get_vllm_metrics", {"service_name": SERVICE}))
    assert m["kv_cache_usage"] is not None and m["metric_names"] > 0
    q = ok(world.client.call("query_vllm", {"prompt": "say hi", "max_tokens": 16, "service_name": SERVICE}))
    assert q["text"] and q["completion_tokens"] and q["completion_tokens"] <= 16
    g = ok(world.client.call("query_gemma4", {"prompt": "say hi", "max_tokens": 8, "service_name": SERVICE}))
    assert g["completion_tokens"] <= 8
    st = ok(
        world.client.call(
            "query_gemma4_with_stats", {"prompt": "hi", "max_tokens": 12, "service_name": SERVICE}
        )
    )
    assert st["usage_reported"] and st["completion_tokens"] <= 12 and st["ttft_s"] is not None


def test_service_logs_are_filtered_bounded_compressed_and_redacted(world: World) -> None:
    from sandbox.cloudlogging.model import STDERR

    rev = ok(world.client.call("status_vllm", {"service_name": SERVICE}))["service"][
        "latest_created_revision"
    ]
    world.sb.write_log(SERVICE, revision=rev, log_id=STDERR, severity="ERROR", text=SECRET_LINE)
    r = ok(
        world.client.call("get_service_logs", {"service_name": SERVICE, "since": "6h", "budget_tokens": 1500})
    )
    assert r["lines_fetched"] > 0 and r["tokens"] <= 1500 * 1.1
    assert "CUDA out of memory" in r["text"]
    assert "verysecrettokenvalue" not in r["text"] and "verysecrettokenvalue" not in str(r)
    errs = ok(
        world.client.call("get_service_logs", {"service_name": SERVICE, "since": "6h", "severity": "ERROR"})
    )
    assert 0 < errs["lines_fetched"] < r["lines_fetched"] and errs["filters"] == {"severity": "ERROR"}
    few = ok(world.client.call("get_service_logs", {"service_name": SERVICE, "since": "6h", "limit": 5}))
    assert few["lines_fetched"] == 5 and few["limit_reached"] and "raise 'limit'" in few["more"]
    nothing = ok(world.client.call("get_service_logs", {"service_name": SERVICE, "text_filter": "zzz-none"}))
    assert nothing["lines_fetched"] == 0


def test_analyze_cloud_logging_sends_selected_redacted_lines_to_the_model(world: World) -> None:
    before = len(world.model_script.requests)
    r = ok(
        world.client.call(
            "analyze_cloud_logging", {"service_name": SERVICE, "since": "6h", "budget_tokens": 1500}
        )
    )
    assert r["analysis"] == REPLY and r["model_error"] is None
    sent = world.model_script.requests[before:]
    assert len(sent) == 1
    prompt = "\n".join(m["content"] for m in sent[0]["messages"])
    assert "CUDA out of memory" in prompt
    assert "verysecrettokenvalue" not in prompt  # redacted before any text reaches a model
    assert len(prompt) < 1500 * 8  # within the token budget (about 4 characters per token), not everything


def test_plan_capacity_and_benchmark_on_the_service(world: World) -> None:
    p = ok(world.client.call("plan_capacity", {"model": "google/gemma-4-12B-it", "gpu": "nvidia-l4"}))
    assert p["fits"] is False and p["binding_constraint"] == "weights"
    b = ok(
        world.client.call(
            "run_benchmark",
            {
                "service_name": SERVICE,
                "concurrencies": [1],
                "context_lengths": [64],
                "output_tokens": 8,
                "requests_per_point": 3,
            },
            timeout=120,
        )
    )
    assert b["points"] and b["points"][0]["ok"] == 3


# --- the extras -----------------------------------------------------------------------------------------


def test_extras_tools(world: World) -> None:
    c = world.client
    q = ok(c.call("check_gpu_quotas", {"region": "us-central1"}))
    assert any(
        x["gpu_type"] == "nvidia-l4" and not x["zonal_redundancy"] and x["limit"] == 3 for x in q["quotas"]
    )
    b = ok(c.call("list_bucket_models", {"bucket": "models-bucket"}))
    assert [m["path"] for m in b["models"]] == ["models/gemma-4-12B-it"]
    v = ok(c.call("list_vertex_models", {"region": "us-central1"}))
    assert v["models"][0]["display_name"] == "gemma-4-12b-it"
    cfg = ok(c.call("get_vllm_deployment_config", {"model": "google/gemma-4-12B-it", "service": "gemma"}))
    assert "gcloud" in cfg["command"] and "nvidia-l4" in cfg["command"]
    gke = ok(c.call("get_vllm_gpu_deployment_config", {"model": "google/gemma-4-12B-it"}))
    assert "kind: Deployment" in gke["manifests_yaml"]
    hf = ok(
        c.call(
            "get_huggingface_model_copy_instructions", {"model_id": "google/gemma-4-12B-it", "bucket": "b-1"}
        )
    )
    assert hf["destination"].startswith("gs://b-1/")
    vx = ok(c.call("get_vertex_ai_model_copy_instructions", {"model": "gemma-4-12b-it", "bucket": "b-1"}))
    assert vx["steps"]
    dl = ok(c.call("get_huggingfacehub_download_path", {"model_id": "google/gemma-4-12B-it"}))
    assert "gemma-4-12B-it" in dl["repo_url"]
    h = ok(c.call("get_help"))
    assert {t["name"] for t in h["tools"]} >= {"deploy_vllm", "get_vllm_metrics"}
    res = c.run(lambda s: s.read_resource("config://vllm-deployment-template"))
    assert "apiVersion: serving.knative.dev/v1" in res.contents[0].text
    bad = c.call("list_bucket_models", {"bucket": "Bad Bucket!"})
    assert bad.isError and "bucket" in text_of(bad)


def test_save_hf_token_reads_the_environment_and_never_returns_it(world: World) -> None:
    r = world.client.call("save_hf_token", {})
    body = ok(r)
    assert body["source"] == "environment variable HF_TOKEN" and body["created_secret"] is True
    assert FAKE_HF not in text_of(r) and FAKE_HF not in str(body)
    tools = world.client.run(lambda s: s.list_tools()).tools
    schema = next(t for t in tools if t.name == "save_hf_token").inputSchema
    assert "token" not in schema["properties"]  # the token is never a tool argument


# --- mutations: plan, then apply with a single-use token ------------------------------------------------


def _mutations(world: World) -> list[Any]:
    return [e for e in world.sb.journal.entries() if e.method in ("POST", "PATCH", "DELETE", "PUT")]


def test_scaling_two_step_flow(world: World) -> None:
    c = world.client
    n0 = len(_mutations(world))
    plan = ok(
        c.call("update_vllm_scaling", {"service_name": HEALTHY, "min_instances": 0, "max_instances": 3})
    )
    assert plan["status"] == "planned" and plan["confirmation_token"]
    assert "+max_instances: 3" in plan["diff"] and "-max_instances: 1" in plan["diff"]
    assert len(_mutations(world)) == n0  # planning changes nothing
    token = plan["confirmation_token"]

    other = c.call(
        "update_vllm_scaling",
        {"service_name": HEALTHY, "min_instances": 0, "max_instances": 4, "confirmation_token": token},
    )
    assert other.isError and "different change" in text_of(other)
    assert len(_mutations(world)) == n0
    # the mismatch spent the token: it cannot be used for its own change any more
    spent = c.call(
        "update_vllm_scaling",
        {"service_name": HEALTHY, "min_instances": 0, "max_instances": 3, "confirmation_token": token},
    )
    assert spent.isError and "already used" in text_of(spent)

    plan = ok(
        c.call("update_vllm_scaling", {"service_name": HEALTHY, "min_instances": 0, "max_instances": 3})
    )
    args = {
        "service_name": HEALTHY,
        "min_instances": 0,
        "max_instances": 3,
        "confirmation_token": plan["confirmation_token"],
    }
    applied = ok(c.call("update_vllm_scaling", args))
    assert applied["status"] == "applied" and applied["result"]["ready"]
    muts = _mutations(world)[n0:]
    assert len(muts) == 1 and muts[0].method == "PATCH" and muts[0].approval == applied["approval_id"]
    assert muts[0].resource.endswith(f"/services/{HEALTHY}")
    svc = ok(c.call("status_vllm", {"service_name": HEALTHY}))["service"]
    assert svc["spec"]["max_instances"] == 3
    same = ok(c.call("update_vllm_scaling", {k: v for k, v in args.items() if k != "confirmation_token"}))
    assert same["status"] == "no_change" and same["confirmation_token"] is None and same["diff"] == ""

    again = c.call("update_vllm_scaling", args)
    assert again.isError and "already used" in text_of(again)
    fake = c.call("update_vllm_scaling", {**args, "confirmation_token": "confirm-made-up"})
    assert fake.isError and "not recognised" in text_of(fake)
    assert len(_mutations(world)) == n0 + 1  # exactly one mutation


def test_expired_token_is_refused(world: World) -> None:
    c = world.client
    n0 = len(_mutations(world))
    plan = ok(
        c.call("update_vllm_scaling", {"service_name": HEALTHY, "min_instances": 0, "max_instances": 2})
    )
    time.sleep(CONFIRM_TTL_S + 0.5)
    r = c.call(
        "update_vllm_scaling",
        {
            "service_name": HEALTHY,
            "min_instances": 0,
            "max_instances": 2,
            "confirmation_token": plan["confirmation_token"],
        },
    )
    assert r.isError and "expired" in text_of(r)
    assert len(_mutations(world)) == n0


def test_rollback_two_step(world: World) -> None:
    c = world.client
    # the scenario service: the failed revision never served, so there is no other Ready revision
    none = c.call("rollback_service", {"service_name": SERVICE})
    assert none.isError and "no other Ready revision" in text_of(none)
    bad = c.call("rollback_service", {"service_name": SERVICE, "revision": "gemma-4-12b-99999-abc"})
    assert bad.isError and "not a revision" in text_of(bad)
    revs = ok(c.call("list_revisions", {"service_name": HEALTHY}))["revisions"]
    assert len(revs) >= 2  # the scaling change made a second one
    n0 = len(_mutations(world))
    plan = ok(c.call("rollback_service", {"service_name": HEALTHY}))
    target = plan["summary"].rsplit(" ", 1)[-1]
    assert plan["status"] == "planned" and target == revs[1]["name"]
    assert len(_mutations(world)) == n0
    done = ok(
        c.call(
            "rollback_service", {"service_name": HEALTHY, "confirmation_token": plan["confirmation_token"]}
        )
    )
    assert done["status"] == "applied"
    muts = _mutations(world)[n0:]
    assert len(muts) == 1 and muts[0].approval == done["approval_id"]
    svc = ok(c.call("status_vllm", {"service_name": HEALTHY}))["service"]
    assert svc["traffic"][0]["revision"] == target and svc["traffic"][0]["percent"] == 100


def test_deploy_and_destroy_two_step(world: World) -> None:
    c = world.client
    args = {
        "service_name": "gemma-new",
        "model_path": "gemma-4-12B-it-qat-w4a16-ct",
        "bucket_name": "models-bucket",
        "max_model_len": 8192,
    }
    n0 = len(_mutations(world))
    plan = ok(c.call("deploy_vllm", args))
    assert plan["status"] == "planned" and plan["current"] is None
    added = [ln for ln in plan["diff"].splitlines() if ln.startswith("+")]
    assert any("--model=/mnt/models/gemma-4-12B-it-qat-w4a16-ct" in ln for ln in added)
    assert any(n.startswith("capacity planner:") for n in plan["notes"])
    assert len(_mutations(world)) == n0
    done = ok(c.call("deploy_vllm", {**args, "confirmation_token": plan["confirmation_token"]}))
    assert done["result"]["operation"] == "create"
    (create,) = _mutations(world)[n0:]
    assert create.method == "POST" and create.approval == done["approval_id"]
    assert create.body and create.body["template"]["volumes"][0]["gcs"]["bucket"] == "models-bucket"

    d_plan = ok(c.call("destroy_vllm", {"service_name": "gemma-new"}))
    assert d_plan["status"] == "planned" and "DELETE" in d_plan["summary"]
    assert len(_mutations(world)) == n0 + 1
    gone = ok(
        c.call(
            "destroy_vllm", {"service_name": "gemma-new", "confirmation_token": d_plan["confirmation_token"]}
        )
    )
    assert gone["status"] == "applied"
    delete = _mutations(world)[-1]
    assert delete.method == "DELETE" and delete.approval == gone["approval_id"]
    r = c.call("status_vllm", {"service_name": "gemma-new"})
    assert r.isError and "not found" in text_of(r)


def test_a_change_that_does_not_become_ready_is_reported_incomplete(world: World) -> None:
    """SERVICE's template is the bf16 checkpoint that does not fit: a new revision of it fails again."""
    c = world.client
    base = {"service_name": SERVICE, "min_instances": 0, "max_instances": 2}
    plan = ok(c.call("update_vllm_scaling", base))
    r = ok(c.call("update_vllm_scaling", {**base, "confirmation_token": plan["confirmation_token"]}))
    assert r["status"] == "incomplete" and r["result"]["ready"] is False
    assert r["result"]["revision"] and r["result"]["message"]
    st = ok(c.call("status_vllm", {"service_name": SERVICE}))["service"]
    serving = st["traffic"][0]["revision"]
    assert serving == st["latest_ready_revision"] != r["result"]["revision"]  # the old one still serves


async def test_suggest_policy_plans_but_never_applies(world: World) -> None:
    """In-process server, official client over memory streams, policy 'suggest'."""
    from mcp.shared.memory import create_connected_server_and_client_session

    from mcp_tools.server import build_server
    from mcp_tools.settings import Policy, Settings

    sb = world.sb
    settings = Settings(**sb.settings_fields(), policy=Policy.SUGGEST)
    n0 = len(_mutations(world))
    async with create_connected_server_and_client_session(build_server(settings)) as session:
        names = {t.name for t in (await session.list_tools()).tools}
        assert "update_vllm_scaling" in names
        r = await session.call_tool(
            "update_vllm_scaling", {"service_name": HEALTHY, "min_instances": 1, "max_instances": 5}
        )
        assert not r.isError and r.structuredContent is not None
        assert (
            r.structuredContent["status"] == "planning_only"
            and r.structuredContent["confirmation_token"] is None
        )
        assert "+max_instances: 5" in r.structuredContent["diff"]
        r2 = await session.call_tool(
            "update_vllm_scaling",
            {
                "service_name": HEALTHY,
                "min_instances": 1,
                "max_instances": 5,
                "confirmation_token": "confirm-x",
            },
        )
        assert r2.isError and "suggest" in text_of(r2)
    assert len(_mutations(world)) == n0


# --- agent-level tools (graph analyzers and diagnosis) ----------------------------------------------------


def test_suggest_sre_remediation_on_the_live_service(world: World) -> None:
    r = ok(
        world.client.call(
            "suggest_sre_remediation", {"service_name": SERVICE, "since": WHOLE_LIFE}, timeout=120
        )
    )
    assert r["category"] == "weights_oom" and r["source"] == f"cloud-run:{SERVICE}"
    assert r["evidence"] and any("out of memory" in e["text"].lower() for e in r["evidence"])
    kinds = [s["kind"] for s in r["plan"]["steps"]]
    assert kinds and set(kinds) <= {"set_model", "set_vllm_args", "set_resources", "rollback", "escalate"}
    assert "verysecrettokenvalue" not in str(r)


def test_analyze_gpu_logs_cites_lines(world: World) -> None:
    r = ok(world.client.call("analyze_gpu_logs", {"service_name": SERVICE, "since": WHOLE_LIFE}, timeout=120))
    assert r["findings"] and r["findings"][0]["category"] == "weights_oom"
    assert all("line" in e for e in r["findings"][0]["evidence"])


async def test_save_hf_token_asks_through_elicitation_when_no_source_has_it(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No HF_TOKEN anywhere: the user is asked through the client (elicitation); the model never sees it."""
    from mcp import types
    from mcp.shared.memory import create_connected_server_and_client_session

    from mcp_tools.server import build_server
    from mcp_tools.settings import get_settings

    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("GEMMA_SRE_SECRETMANAGER_API_ENDPOINT", world.extras_url)
    monkeypatch.setenv("GEMMA_SRE_ANONYMOUS_CREDENTIALS", "1")
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", world.sb.project)
    get_settings.cache_clear()
    asked: list[str] = []
    token = "hf_" + "Elicited0123456789abcdefghijKLMNOPQRS"

    async def answer(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"token": token})

    async with create_connected_server_and_client_session(
        build_server(get_settings()), elicitation_callback=answer
    ) as session:
        r = await session.call_tool("save_hf_token", {"secret_id": "hf-elicited"})
        assert not r.isError, text_of(r)
        assert asked and "Hugging Face" in asked[0]
        assert (
            r.structuredContent is not None
            and r.structuredContent["source"] == "the MCP client (elicitation)"
        )
        assert token not in text_of(r) and token not in str(r.structuredContent)
    stored = world.extras.secrets[f"projects/{world.sb.project}/secrets/hf-elicited"]
    assert stored.versions[-1] == token.encode()

    async def decline(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async with create_connected_server_and_client_session(
        build_server(get_settings()), elicitation_callback=decline
    ) as session:
        r = await session.call_tool("save_hf_token", {"secret_id": "hf-elicited"})
        assert r.isError and "no token given" in text_of(r)
