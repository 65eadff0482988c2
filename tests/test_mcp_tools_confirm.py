"""Confirmation tokens verified statelessly: the key and the single-use ledger in the state dir, shared
by every process; the token shown whole in a result's text while secrets around it are redacted."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from mcp_tools.errors import UserError
from mcp_tools.redact import redact
from mcp_tools.server.confirm import KEY_FILE, ConfirmationStore
from mcp_tools.server.core import result
from mcp_tools.server.tools_mutate import MutationPlan, _plan_text
from tests.mcp_client import ROOT
from tests.secret_shapes import SHAPES

ARGS = {"min_instances": 0, "max_instances": 3}


def refused(store: ConfirmationStore, token: str, *change: object) -> str:
    with pytest.raises(UserError) as e:
        store.redeem(token, *change)  # type: ignore[arg-type]
    return str(e.value)


def test_a_token_from_one_store_is_redeemed_once_by_another(tmp_path: Path) -> None:
    issuer, other = ConfirmationStore(tmp_path), ConfirmationStore(tmp_path)  # two processes' worth
    token = issuer.issue("update_vllm_scaling", "svc", ARGS, "etag-1")
    key = tmp_path / "mcp" / KEY_FILE
    assert key.stat().st_mode & 0o777 == 0o600 and len(key.read_bytes()) == 32
    approval = other.redeem(token, "update_vllm_scaling", "svc", dict(reversed(ARGS.items())), "etag-1")
    assert approval.startswith("mcp-")
    again = refused(issuer, token, "update_vllm_scaling", "svc", ARGS, "etag-1")
    assert "already used" in again


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (("update_vllm_scaling", "svc", {**ARGS, "max_instances": 4}, "etag-1"), "different change"),
        (("rollback_service", "svc", ARGS, "etag-1"), "different change"),
        (("update_vllm_scaling", "other", ARGS, "etag-1"), "different change"),
        (("update_vllm_scaling", "svc", ARGS, "etag-2"), "changed since this plan"),
    ],
)
def test_a_token_for_another_change_is_refused_and_spent(
    tmp_path: Path, change: tuple[object, ...], why: str
) -> None:
    store = ConfirmationStore(tmp_path)
    token = store.issue("update_vllm_scaling", "svc", ARGS, "etag-1")
    assert why in refused(store, token, *change)
    assert "already used" in refused(store, token, "update_vllm_scaling", "svc", ARGS, "etag-1")


def test_expired_altered_and_foreign_tokens(tmp_path: Path) -> None:
    short = ConfirmationStore(tmp_path, ttl_s=0.2)
    token = short.issue("destroy_vllm", "svc", {}, "e")
    time.sleep(0.4)
    assert "expired" in refused(short, token, "destroy_vllm", "svc", {}, "e")
    store = ConfirmationStore(tmp_path)
    good = store.issue("destroy_vllm", "svc", {}, "e")
    flipped = good[:-3] + ("a" if good[-3] != "a" else "b") + good[-2:]
    foreign = ConfirmationStore(tmp_path / "elsewhere").issue("destroy_vllm", "svc", {}, "e")
    for bad in (flipped, foreign, "confirm-made-up", "", "confirm-" + "a" * 60):
        assert "not recognised" in refused(store, bad, "destroy_vllm", "svc", {}, "e")
    assert store.redeem(good, "destroy_vllm", "svc", {}, "e")  # none of that spent the real one


def test_a_key_readable_by_others_is_refused(tmp_path: Path) -> None:
    store = ConfirmationStore(tmp_path)
    store.issue("destroy_vllm", "svc", {}, "e")
    (tmp_path / "mcp" / KEY_FILE).chmod(0o644)
    with pytest.raises(UserError, match="chmod 600"):
        ConfirmationStore(tmp_path).issue("destroy_vllm", "svc", {}, "e")


RACE = """
import sys
from mcp_tools.errors import UserError
from mcp_tools.server.confirm import ConfirmationStore
try:
    ConfirmationStore(sys.argv[1]).redeem(sys.argv[2], "destroy_vllm", "svc", {}, "e")
    print("applied")
except UserError as e:
    print(e)
"""


def test_two_processes_redeeming_at_once_apply_once(tmp_path: Path) -> None:
    token = ConfirmationStore(tmp_path).issue("destroy_vllm", "svc", {}, "e")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACE, str(tmp_path), token], cwd=ROOT, stdout=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert sorted(outs)[0] == "applied" and outs.count("applied") == 1, outs
    assert all("already used" in o for o in outs if o != "applied")


def test_the_text_shows_the_token_and_still_hides_secrets(tmp_path: Path) -> None:
    token = ConfirmationStore(tmp_path).issue("update_vllm_scaling", "svc", ARGS, "e")
    assert redact(token) == token  # lower-case base32: no shape of a credential
    secrets = [s for s in SHAPES if "\n" not in s.text]
    plan = MutationPlan(
        tool="update_vllm_scaling",
        service="svc",
        status="planned",
        summary="scale svc",
        notes=[s.text for s in secrets],
        confirmation_token=token,
        expires_in_s=300,
    )
    r = result(plan, _plan_text(plan))
    text = r.content[0].text  # type: ignore[union-attr]
    assert f"confirmation_token='{token}'" in text
    assert r.structuredContent is not None and r.structuredContent["confirmation_token"] == token
    leaked = [s.name for s in secrets if s.secret in text or s.secret in str(r.structuredContent)]
    assert not leaked
