"""``tools/list`` of the server users run is what FastMCP makes of each tool function on its own: what
the server does to start sooner (a result model shared by several tools has its schema built once)
changes no name, no input schema and no output schema."""

from __future__ import annotations

from typing import Any

from mcp.server.fastmcp.utilities.context_injection import find_context_parameter
from mcp.server.fastmcp.utilities.func_metadata import StrictJsonSchema, _inline_root_ref, func_metadata
from mcp.shared.memory import create_connected_server_and_client_session
from pydantic import BaseModel

from agent.mcp_agent_faces import register_agent_faces
from agent.mcp_agent_tools import register_agent_tools
from mcp_tools.server import SharedResult, build_server


def _fresh_output_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The output schema pydantic itself builds for ``model`` (no cache of ours in between)."""
    own = BaseModel.model_json_schema.__func__  # type: ignore[attr-defined]
    return _inline_root_ref(own(model, schema_generator=StrictJsonSchema))


async def test_listed_tools_are_fastmcps_own_listing() -> None:
    server = build_server(extra_registrars=[register_agent_tools, register_agent_faces])
    async with create_connected_server_and_client_session(server) as client:
        listed = (await client.list_tools()).tools
    names = [t.name for t in listed]
    assert len(names) == len(set(names)) and len(names) >= 30
    shared = 0
    for t in listed:
        registered = server._tool_manager.get_tool(t.name)
        assert registered is not None
        fn = registered.fn
        ctx = find_context_parameter(fn)
        meta = func_metadata(fn, skip_names=[ctx] if ctx else [])
        assert t.inputSchema == meta.arg_model.model_json_schema(by_alias=True), t.name
        assert meta.output_model is not None, f"{t.name} has no structured result"
        assert t.outputSchema == _fresh_output_schema(meta.output_model), t.name
        shared += issubclass(meta.output_model, SharedResult)
    assert shared >= 8  # MutationPlan (4 tools); EndpointResult, QueryResult, DiagnosisOut, OutcomeOut (2)


def test_a_shared_schema_is_a_copy_each_time() -> None:
    from mcp_tools.server import MutationPlan

    first = MutationPlan.model_json_schema()
    first["properties"].clear()  # a caller that edits its schema changes nobody else's
    assert MutationPlan.model_json_schema() == _inline_root_ref(
        BaseModel.model_json_schema.__func__(MutationPlan)  # type: ignore[attr-defined]
    )


def test_a_result_models_schema_is_pydantics_own_for_every_kind_of_default() -> None:
    """``ResultModel`` writes plain defaults itself (``core.plain_defaults``); every other default, and
    every plain one, comes out as pydantic writes it."""
    from enum import IntEnum, StrEnum

    from pydantic import Field

    from mcp_tools.server import ResultModel

    class Colour(StrEnum):
        RED = "red"

    class Level(IntEnum):
        LOW = 1

    class Inner(BaseModel):
        at: float = float("-inf")

    class Odd(ResultModel):
        nothing: str | None = None
        yes: bool = True
        count: int = 3
        name: str = "x"
        ratio: float = 0.5
        big: float = float("inf")  # not finite: pydantic's to write
        colour: Colour = Colour.RED
        level: Level = Level.LOW
        items: list[int] = Field(default_factory=lambda: [1, 2])
        fixed: tuple[int, ...] = (1, 2)
        inner: Inner = Inner()

    for mode in ("validation", "serialization"):
        ours = Odd.model_json_schema(schema_generator=StrictJsonSchema, mode=mode)  # type: ignore[arg-type]
        own = BaseModel.model_json_schema.__func__(Odd, schema_generator=StrictJsonSchema, mode=mode)  # type: ignore[attr-defined]
        assert ours == own, mode
        # positional arguments reach pydantic as they would without the override
        assert Odd.model_json_schema(True, "#/$defs/{model}", StrictJsonSchema, mode) == own, mode  # type: ignore[arg-type]
    defaults = {k: v.get("default") for k, v in ours["properties"].items()}
    # written as JSON values: not the enums, not the tuple
    assert [type(defaults[k]) for k in ("colour", "level", "fixed")] == [str, int, list]
