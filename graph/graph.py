"""The loop, wired. Nodes: ``graph/nodes/``; routes: ``graph/policy.py``; state: ``graph/state.py``.

    observe -> diagnose -> propose -> preflight -> approve (interrupt) -> apply -> verify -> report
                      \\-> report (healthy)   \\-> report (read-only, suggest,      \\-> rollback -> report
                                                 refused, nothing to apply, rejected)

``graph`` is compiled without a checkpointer, for LangGraph Server / Studio / ``langgraph dev`` (which
bring their own; see ``langgraph.json`` and docs/langgraph-server.md). The CLI compiles ``builder`` with
``graph.checkpoint``'s saver. ``Configuration`` is the graph's context schema: what a run's ``context``
(or ``config["configurable"]``) may set, shown by the server's ``/assistants/{id}/schemas``.
"""

from __future__ import annotations

from langgraph.graph import END, START, StateGraph

from graph.config import Configuration
from graph.nodes.apply import apply
from graph.nodes.approve import approve
from graph.nodes.diagnose import diagnose_node
from graph.nodes.observe import observe
from graph.nodes.preflight import preflight_node
from graph.nodes.propose import propose
from graph.nodes.report import report
from graph.nodes.rollback import rollback
from graph.nodes.verify import verify
from graph.policy import route_after_approve, route_after_diagnose, route_after_preflight, route_after_verify
from graph.state import SREState

builder = StateGraph(SREState, context_schema=Configuration)
builder.add_node("observe", observe)
builder.add_node("diagnose", diagnose_node)
builder.add_node("propose", propose)
builder.add_node("preflight", preflight_node)
builder.add_node("approve", approve)
builder.add_node("apply", apply)
builder.add_node("verify", verify)
builder.add_node("rollback", rollback)
builder.add_node("report", report)

builder.add_edge(START, "observe")
builder.add_edge("observe", "diagnose")
builder.add_conditional_edges("diagnose", route_after_diagnose, ["propose", "report"])
builder.add_edge("propose", "preflight")
builder.add_conditional_edges("preflight", route_after_preflight, ["approve", "report"])
builder.add_conditional_edges("approve", route_after_approve, ["apply", "report"])
builder.add_edge("apply", "verify")
builder.add_conditional_edges("verify", route_after_verify, ["rollback", "report"])
builder.add_edge("rollback", "report")
builder.add_edge("report", END)

graph = builder.compile(name="gemma-sre")
