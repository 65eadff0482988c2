"""``gemma-sre plan``: will this model fit this GPU at these vLLM flags?"""

from __future__ import annotations

import typer

from agent.params import bounded


def register(app: typer.Typer) -> None:
    @app.command(context_settings={"allow_extra_args": False})
    def plan(
        ctx: typer.Context,
        model: str = typer.Argument(
            None, help="A catalog id (e.g. google/gemma-4-12B-it) or a path to a Hugging Face config.json."
        ),
        gpu: str = typer.Option(
            None, "--gpu", help="GPU name: nvidia-l4, l4, 'NVIDIA L4', nvidia-h100-80gb ..."
        ),
        gpu_memory_gib: float = typer.Option(
            None,
            "--gpu-memory-gib",
            parser=bounded(float, 0, 1_024, lo_open=True),
            help="GPU memory as CUDA reports it, GiB.",
        ),
        gpu_memory_used_gib: float = typer.Option(
            None,
            "--gpu-memory-used-gib",
            parser=bounded(float, 0, 1_024),
            help="GPU memory other processes already hold (a desktop, another server), GiB per GPU.",
        ),
        gpu_count: int = typer.Option(
            1, "--gpu-count", parser=bounded(int, 1, 16), help="GPUs per instance."
        ),
        max_model_len: str = typer.Option(None, "--max-model-len"),
        gpu_memory_utilization: float = typer.Option(
            None, "--gpu-memory-utilization", parser=bounded(float, 0, 1, lo_open=True)
        ),
        kv_cache_dtype: str = typer.Option(None, "--kv-cache-dtype"),
        quantization: str = typer.Option(None, "--quantization"),
        dtype: str = typer.Option(None, "--dtype"),
        max_num_seqs: str = typer.Option(None, "--max-num-seqs"),
        max_num_batched_tokens: str = typer.Option(None, "--max-num-batched-tokens"),
        tensor_parallel_size: str = typer.Option(None, "--tensor-parallel-size"),
        block_size: str = typer.Option(None, "--block-size"),
        enforce_eager: bool = typer.Option(False, "--enforce-eager"),
        vllm_version: str = typer.Option(
            None, "--vllm-version", help="Account as this vLLM release does (default: the current one)."
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the SPEC section 4 JSON document."),
        list_models: bool = typer.Option(
            False, "--list-models", help="List the built-in model catalog and exit."
        ),
        show_gpus: bool = typer.Option(False, "--list-gpus", help="List the GPU catalog and exit."),
    ) -> None:
        """Compute whether MODEL fits the GPU with these vLLM flags, and the KV cache left.

        Exit 0 whether or not it fits (it is a report); 2 on bad input."""
        import json

        from mcp_tools.capacity import list_catalog, list_gpus, plan_request
        from mcp_tools.errors import UserError

        if list_models:
            for mid in list_catalog():
                typer.echo(mid)
            return
        if show_gpus:
            for g in list_gpus():
                typer.echo(
                    f"{g.name}\t{g.memory_gib:.2f} GiB\tcc {g.compute_capability}\t{g.bandwidth_gbps:g} GB/s"
                )
            return
        if not model:
            raise UserError("plan: give a MODEL (a catalog id or a config.json path)")
        result = plan_request(ctx.params)  # the options by name: the vLLM flags and the GPU
        if as_json:
            typer.echo(json.dumps(result.to_spec_json(), indent=2))
            return
        _print_table(result)


def _print_table(p: object) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from mcp_tools.capacity import CapacityPlan

    assert isinstance(p, CapacityPlan)
    console = Console()
    t = Table(title=f"{p.model} on {p.gpu_count} x {p.gpu}", show_header=False, title_justify="left")
    t.add_column("item", style="bold")
    t.add_column("value", justify="right")
    t.add_column("note")
    t.add_row(
        "GPU memory",
        f"{p.gpu_memory_gib:.2f} GiB",
        f"cc {p.gpu_compute_capability or '?'}, x {p.gpu_memory_utilization:g} utilization",
    )
    t.add_row(
        "weights",
        f"{p.weights_gib:.2f} GiB",
        f"{p.num_params / 1e9:.2f} B params, {p.weight_format}, per GPU (TP {p.tensor_parallel_size})",
    )
    t.add_row(
        "activation peak",
        f"{p.activation_gib:.2f} GiB",
        f"profile run: {p.max_num_batched_tokens:,} batched tokens, {p.max_num_seqs} seqs",
    )
    t.add_row(
        "overhead",
        f"{p.overhead_gib:.2f} GiB",
        f"non-torch {p.non_torch_gib:.2f} + CUDA graphs {p.cuda_graph_gib:.2f}"
        + (f"; {p.gpu_memory_used_gib:.2f} GiB held by other processes" if p.gpu_memory_used_gib else ""),
    )
    t.add_row(
        "KV cache",
        f"{p.kv_cache_gib:.2f} GiB",
        f"{p.kv_cache_dtype}, {p.kv_bytes_per_token:,} bytes per token",
    )
    low, high = p.kv_cache_tokens_range
    t.add_row(
        "KV cache tokens",
        f"{p.kv_cache_tokens:,}",
        f"{p.gpu_blocks:,} blocks; range {low:,} to {high:,} (fits is judged at {low:,})",
    )
    t.add_row(
        "max concurrency",
        f"{p.max_concurrency:.2f}x",
        f"at max_model_len {p.max_model_len:,} (model limit {p.model_context_limit:,})",
    )
    t.add_row(
        "one request needs",
        f"{p.kv_needed_gib_one_request:.2f} GiB",
        f"longest max_model_len that fits: {p.max_model_len_that_fits:,}",
    )
    console.print(t)
    style = "green" if p.fits else "red"
    verdict = p.verdict.removeprefix("fits: ").removeprefix(
        "does not fit: "
    )  # not "DOES NOT FIT: does not fit:"
    console.print(
        f"[{style}]{'FITS' if p.fits else 'DOES NOT FIT'}[/{style}]: {escape(verdict)}", highlight=False
    )
    for w in p.warnings:
        console.print(f"[yellow]warning:[/yellow] {w}", highlight=False)
    if p.suggestions:
        s = Table(title="changes that would help", title_justify="left")
        s.add_column("kind")
        s.add_column("change")
        s.add_column("fits")
        s.add_column("KV tokens", justify="right")
        s.add_column("weights GiB", justify="right")
        for sug in p.suggestions:
            change = ", ".join(f"{k}={v}" for k, v in {**sug.change, **sug.also}.items())
            s.add_row(
                sug.kind,
                change,
                "yes" if sug.fits else "no",
                f"{sug.kv_cache_tokens:,}",
                f"{sug.weights_gib:.2f}",
            )
        console.print(s)
