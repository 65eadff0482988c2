"""What a person is asked to decide: a thread's ranked options and the approval request (the approve
node's ``interrupt()`` payload), re-exported by ``graph.state``.

Apart from the loop's other state models: ``gemma-sre mcp`` lists ``ApprovalRequest`` in ``investigate``'s
result schema, so its start builds these two models and not the rest of the state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, computed_field

from mcp_tools.remediation import RemediationPlan

if TYPE_CHECKING:
    from graph.state import SREState


class OptionView(BaseModel):
    """One ranked option as a person is shown it: its rank, steps in words, and preflight's verdict."""

    rank: int  # 1-based, as ``approve --option N`` takes it
    steps: str
    ok: bool
    reasons: list[str] = Field(default_factory=list)  # why it failed preflight (empty when it passed)
    offered: bool = False  # the plan put to the person (the first that passes)
    predicted: dict[str, Any] | None = None  # the capacity planner's figures for it, when it has them

    @property
    def line(self) -> str:
        verdict = "offered: passes preflight" if self.offered else "passes preflight"
        if not self.ok:
            verdict = "fails preflight: " + ("; ".join(self.reasons) or "no reason recorded")
        p = self.predicted or {}
        figures = []
        if p.get("weights_gib") is not None:
            figures.append(f"weights {float(p['weights_gib']):.1f} GiB")
        if p.get("kv_cache_tokens") is not None:
            figures.append(f"KV cache {int(p['kv_cache_tokens']):,} tokens")
        if p.get("fits") is not None:
            figures.append("fits" if p["fits"] else "does not fit")
        predicted = f" [predicted: {', '.join(figures)}]" if figures else ""
        return f"{self.rank}. {self.steps}{predicted} ({verdict})"

    @classmethod
    def of_state(cls, state: SREState | dict[str, Any]) -> list[OptionView]:
        """The state's ranked options (``ranked``, as preflight checked them)."""
        from graph.preflight import plan_text, why_not

        offered = (state.get("preflight") or {}).get("option")
        out: list[OptionView] = []
        for i, raw in enumerate(state.get("ranked") or [], start=1):
            p = RemediationPlan.model_validate(raw)
            reasons = [] if p.preflight.ok else why_not(p)
            pred = next((st.predicted for st in p.steps if st.predicted), None)
            out.append(
                cls(
                    rank=i,
                    steps=plan_text(p),
                    ok=p.preflight.ok,
                    reasons=reasons,
                    offered=i == offered,
                    predicted=pred,
                )
            )
        return out


APPROVAL_QUESTION = "Apply this plan? Resume with {'decision': 'approve'|'reject', 'approver': NAME}."


class ApprovalRequest(BaseModel):
    """What a person is asked to decide (the approve node's ``interrupt()`` payload): the plan, its
    revision diff and the planner's prediction. A decision echoes ``plan_key``: it is bound to this plan."""

    thread_id: str
    service: str
    category: str | None = None
    summary: str | None = None
    plan: RemediationPlan = Field(default_factory=RemediationPlan)
    plan_key: str = ""
    diff: str = ""
    preflight_notes: list[str] = Field(default_factory=list)
    question: str = APPROVAL_QUESTION
    options: list[OptionView] = Field(default_factory=list)  # every ranked option (approve --option N)

    @classmethod
    def of_state(
        cls, state: SREState | dict[str, Any], *, thread_id: str, service: str, plan_key: str = ""
    ) -> ApprovalRequest:
        """The request a thread's state makes (``plan_key`` empty: shown, not yet put to a person)."""
        pf = state.get("preflight") or {}
        diag = state.get("diagnosis") or {}
        return cls(
            thread_id=thread_id,
            service=service,
            category=diag.get("category"),
            summary=diag.get("summary"),
            plan=RemediationPlan.model_validate(state.get("plan") or {}),
            plan_key=plan_key,
            diff=pf.get("diff", ""),
            preflight_notes=list(pf.get("notes", [])),
            options=OptionView.of_state(state),
        )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def prediction(self) -> list[dict[str, Any]]:
        """The planner's figures, one per step that has them."""
        return [s.predicted for s in self.plan.steps if s.predicted]
