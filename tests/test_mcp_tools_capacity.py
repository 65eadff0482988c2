"""The capacity planner: model/GPU/flag resolution, vLLM's memory accounting, start-up parsing, CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mcp_tools.capacity import (
    CapacityPlan,
    VllmFlags,
    kv_layout,
    list_catalog,
    parse_gpu_memory_in_use,
    parse_vllm_args,
    parse_vllm_startup,
    plan_capacity,
    resolve_gpu,
    resolve_model,
    spec_from_config,
)
from mcp_tools.errors import UserError

#: SPEC section 4's example document, as the SPEC writes it: its keys, in its order, are the contract
#: (the test holds its own copy of the contract, not the code's list).
SPEC_EXAMPLE = json.loads(
    """{"model": "...", "gpu": "nvidia-l4", "gpu_memory_gib": 22.03, "weights_gib": 0.0,
    "activation_gib": 0.0, "overhead_gib": 0.0, "kv_cache_gib": 0.0, "kv_bytes_per_token": 0,
    "kv_cache_tokens": 0, "max_concurrency": 0.0, "fits": true, "verdict": "one line",
    "warnings": ["..."]}"""
)


# --- the reference case -------------------------------------------------------------------------


def test_reference_12b_bf16_on_one_l4_does_not_fit_because_of_weights() -> None:
    p = plan_capacity("google/gemma-4-12B-it", gpu="nvidia-l4")
    assert not p.fits
    assert p.binding_constraint == "weights"
    assert p.weights_gib > p.gpu_memory_gib * 0.9
    assert p.kv_cache_tokens == 0
    kinds = {s.kind for s in p.suggestions}
    assert "set_model" in kinds
    fitting_models = [s.change["model"] for s in p.suggestions if s.kind == "set_model" and s.fits]
    assert "google/gemma-4-12B-it-qat-w4a16-ct" in fitting_models
    assert "RedHatAI/gemma-4-12B-it-FP8-Dynamic" in fitting_models


def test_reference_fp8_fits_and_qat_fits_with_more_kv_cache() -> None:
    # The reference deployment's flags (at the full 262,144-token context the FP8 checkpoint is
    # borderline on an L4 once CUDA-graph memory is taken from the cache, vLLM 0.21+).
    ref = parse_vllm_args(["--max-model-len", "16384", "--gpu-memory-utilization", "0.90"])
    fp8 = plan_capacity("RedHatAI/gemma-4-12B-it-FP8-Dynamic", gpu="nvidia-l4", flags=ref)
    qat = plan_capacity("google/gemma-4-12B-it-qat-w4a16-ct", gpu="nvidia-l4", flags=ref)
    assert fp8.fits and qat.fits
    assert fp8.binding_constraint is None
    assert qat.weights_gib < fp8.weights_gib
    assert qat.kv_cache_tokens > fp8.kv_cache_tokens > 0


def test_reference_nvfp4_kv_cache_on_l4_is_refused() -> None:
    flags = parse_vllm_args(["--kv-cache-dtype=nvfp4"])
    p = plan_capacity("google/gemma-4-12B-it-qat-w4a16-ct", gpu="nvidia-l4", flags=flags)
    assert not p.fits
    assert p.binding_constraint == "unsupported"
    assert any("NVFP4 KV cache" in u and "Blackwell" in u for u in p.unsupported)
    assert p.suggestions and p.suggestions[0].change == {"--kv-cache-dtype": "fp8"}
    # On a Blackwell GPU the same flags are accepted.
    assert plan_capacity("google/gemma-4-12B-it-qat-w4a16-ct", gpu="b200", flags=flags).fits


def test_bf16_refused_on_t4_but_auto_dtype_falls_back_to_fp16() -> None:
    p = plan_capacity("Qwen/Qwen2.5-7B-Instruct", gpu="t4", flags=VllmFlags(dtype="bfloat16"))
    assert p.binding_constraint == "unsupported"
    assert any("Bfloat16" in u for u in p.unsupported)
    auto = plan_capacity("Qwen/Qwen2.5-7B-Instruct", gpu="t4", flags=VllmFlags(max_model_len=1024))
    assert auto.dtype == "float16"
    assert auto.binding_constraint != "unsupported"


def test_kv_bound_case_names_the_kv_cache_and_proposes_shorter_len_and_fp8_kv() -> None:
    flags = VllmFlags(max_model_len=131072)
    p = plan_capacity("meta-llama/Llama-3.1-8B-Instruct", gpu="nvidia-l4", flags=flags)
    assert not p.fits and p.binding_constraint == "kv_cache"
    assert 0 < p.max_model_len_that_fits < 131072
    changes = [s.change for s in p.suggestions]
    assert {"--kv-cache-dtype": "fp8"} in changes
    shorter = [s for s in p.suggestions if "--max-model-len" in s.change]
    assert shorter and shorter[0].fits
    n = shorter[0].change["--max-model-len"]
    assert isinstance(n, int) and n <= p.max_model_len_that_fits
    assert plan_capacity(
        "meta-llama/Llama-3.1-8B-Instruct", gpu="nvidia-l4", flags=VllmFlags(max_model_len=n)
    ).fits


def test_more_gpus_halve_the_weights_per_gpu() -> None:
    one = plan_capacity("meta-llama/Llama-3.1-8B-Instruct", gpu="l4", flags=VllmFlags(max_model_len=8192))
    two = plan_capacity(
        "meta-llama/Llama-3.1-8B-Instruct", gpu="l4", gpu_count=2, flags=VllmFlags(max_model_len=8192)
    )
    assert two.tensor_parallel_size == 2
    assert two.weights_gib == pytest.approx(one.weights_gib / 2, rel=0.01)
    assert two.kv_cache_tokens > 2 * one.kv_cache_tokens


def test_fp8_kv_cache_doubles_the_tokens() -> None:
    base = plan_capacity(
        "meta-llama/Llama-3.1-8B-Instruct", gpu="a100-80gb", flags=VllmFlags(max_model_len=8192)
    )
    fp8 = plan_capacity(
        "meta-llama/Llama-3.1-8B-Instruct",
        gpu="h100",
        flags=VllmFlags(max_model_len=8192, kv_cache_dtype="fp8"),
    )
    assert base.kv_bytes_per_token == 32 * 8 * 128 * 2 * 2  # layers x kv heads x head dim x (K,V) x bf16
    assert fp8.kv_bytes_per_token == base.kv_bytes_per_token // 2


# --- vLLM's KV layout ---------------------------------------------------------------------------


def test_uniform_layout_matches_vllm_arithmetic() -> None:
    spec = resolve_model("meta-llama/Llama-3.1-8B-Instruct")
    layout = kv_layout(spec, tp=1, block_size=16, kv_bytes=2)
    avail = 10 * 1024**3
    blocks = layout.num_blocks(avail)
    page = 16 * 8 * 128 * 2 * 2
    assert blocks == avail // page // 32
    assert layout.reported_tokens(blocks) == blocks * 16
    # max concurrency for 8192-token requests = blocks / (8192 / 16)
    assert layout.max_concurrency(blocks, 8192, 2048) == pytest.approx(blocks / 512)


def test_hybrid_gemma4_layout_unifies_pages_and_groups_layers() -> None:
    spec = resolve_model("google/gemma-4-12B-it")
    layers = spec.kv_layers()
    full = [x for x in layers if x.kind == "full"]
    sliding = [x for x in layers if x.kind == "sliding"]
    assert len(full) == 8 and len(sliding) == 40
    assert (full[0].num_kv_heads, full[0].head_dim) == (1, 512)
    assert (sliding[0].num_kv_heads, sliding[0].head_dim, sliding[0].sliding_window) == (8, 256, 1024)
    layout = kv_layout(spec, tp=1, block_size=16, kv_bytes=2)
    # 8 full + 40 sliding -> group size 8 -> 1 full group + 5 sliding groups
    assert layout.group_size == 8 and len(layout.groups) == 6
    page = 16 * 8 * 256 * 2 * 2  # sliding page; the full layers' block grows to 64 tokens to match
    assert layout.page_bytes == page
    assert {spec_.block_size for spec_, _ in layout.groups} == {16, 64}
    # a sliding layer needs at most sliding_window - 1 + max_num_batched_tokens tokens (+1 block)
    need = layout.max_memory_usage_bytes(262144, 2048)
    full_blocks = -(-262144 // 64)
    sliding_blocks = -(-(1023 + 2048) // 16) + 1
    assert need == 8 * page * (full_blocks + 5 * sliding_blocks)


def test_kv_shared_layers_allocate_no_cache() -> None:
    spec = resolve_model("google/gemma-4-E2B-it")
    layers = spec.kv_layers()
    assert sum(x.shared for x in layers) == 20
    layout = kv_layout(spec, tp=1, block_size=16, kv_bytes=2)
    assert sum(n for _, n in layout.groups) >= 15  # 15 layers own a cache (groups may pad)


# --- resolution ---------------------------------------------------------------------------------


def test_catalog_has_the_gemma4_family_with_sources() -> None:
    ids = list_catalog()
    for want in (
        "google/gemma-4-E2B-it",
        "google/gemma-4-E4B-it",
        "google/gemma-4-12B-it",
        "google/gemma-4-12B-it-qat-w4a16-ct",
        "RedHatAI/gemma-4-12B-it-FP8-Dynamic",
        "google/gemma-4-26B-A4B-it",
        "google/gemma-4-31B-it",
        "meta-llama/Llama-3.1-8B-Instruct",
    ):
        assert want in ids
        assert resolve_model(want).source


@pytest.mark.parametrize(
    "ref",
    [
        "google/gemma-4-12B-it",
        "GOOGLE/GEMMA-4-12b-IT",
        "/mnt/models/gemma-4-12B-it",
        "gs://bucket/google/gemma-4-12B-it",
        "gs://bucket/models/gemma-4-12B-it/",
    ],
)
def test_resolve_model_by_id_path_or_uri(ref: str) -> None:
    assert resolve_model(ref).id == "google/gemma-4-12B-it"


def test_config_json_top_level_and_nested_text_config(tmp_path: Path) -> None:
    cfg = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "nested").mkdir()
    (tmp_path / "nested" / "config.json").write_text(
        json.dumps({"architectures": ["X"], "model_type": "m", "text_config": cfg, "vision_config": {}})
    )
    flat = resolve_model(str(tmp_path / "flat" / "config.json"))
    nested = resolve_model(str(tmp_path / "nested" / "config.json"))
    assert (
        flat.num_params == nested.num_params == resolve_model("meta-llama/Llama-3.1-8B-Instruct").num_params
    )
    assert 8.0e9 < flat.num_params < 8.1e9  # Llama 3.1 8B has 8.03 B parameters


def test_quantization_config_sets_the_weight_format(tmp_path: Path) -> None:
    cfg = json.loads(json.dumps(resolve_model("meta-llama/Llama-3.1-8B-Instruct").model_dump()))
    raw = {
        "hidden_size": cfg["hidden_size"],
        "intermediate_size": cfg["intermediate_size"],
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True},
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    spec = resolve_model(str(path))
    assert spec.quantization is not None and spec.quantization.format == "w4a16"
    p = plan_capacity(spec, gpu="l4", flags=VllmFlags(max_model_len=8192))
    bf16 = plan_capacity("meta-llama/Llama-3.1-8B-Instruct", gpu="l4", flags=VllmFlags(max_model_len=8192))
    assert p.weights_gib < bf16.weights_gib / 2


@pytest.mark.parametrize(
    "content,needle",
    [("{not json", "not valid JSON"), ("[1, 2]", "not a JSON object"), ('{"hidden_size": 1}', "no usable")],
)
def test_malformed_config_is_a_user_error(tmp_path: Path, content: str, needle: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(content)
    with pytest.raises(UserError, match=needle):
        resolve_model(str(path))


def test_missing_config_and_unknown_model_are_user_errors(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such file"):
        resolve_model(str(tmp_path / "nope" / "config.json"))
    with pytest.raises(UserError, match="not a catalog id"):
        resolve_model("acme/unknown-model")


@pytest.mark.parametrize("name", ["nvidia-l4", "l4", "L4", "NVIDIA L4", "nvidia l4"])
def test_resolve_gpu_names(name: str) -> None:
    g = resolve_gpu(name)
    assert g.name == "nvidia-l4"
    assert g.memory_gib == pytest.approx(22.03)
    assert g.compute_capability == "8.9"
    assert "fp8" in g.supports and "nvfp4" not in g.supports


def test_gpu_catalog_covers_the_required_gpus() -> None:
    for name in ("t4", "l4", "a10g", "a100", "a100-80gb", "h100", "h200", "rtx-pro-6000", "b200"):
        g = resolve_gpu(name)
        assert g.memory_gib > 0 and g.bandwidth_gbps > 0
    assert "bfloat16" not in resolve_gpu("t4").supports
    assert "nvfp4" in resolve_gpu("b200").supports
    with pytest.raises(UserError, match="unknown"):
        resolve_gpu("voodoo-5")


def test_bad_numbers_are_user_errors() -> None:
    with pytest.raises(UserError):
        plan_capacity("google/gemma-4-12B-it", gpu="l4", gpu_count=0)
    with pytest.raises(UserError):
        plan_capacity("google/gemma-4-12B-it", gpu_memory_gib=-1)
    with pytest.raises(UserError, match="above"):
        plan_capacity("google/gemma-4-12B-it", gpu="l4", flags=VllmFlags(max_model_len=10**7))
    with pytest.raises(UserError):
        plan_capacity("google/gemma-4-12B-it")


# --- flags --------------------------------------------------------------------------------------


def test_parse_vllm_args_both_spellings_booleans_positional_and_extras() -> None:
    f = parse_vllm_args(
        [
            "vllm",
            "serve",
            "/mnt/models/gemma-4-12B-it",
            "--max-model-len=16384",
            "--gpu-memory-utilization",
            "0.95",
            "--kv-cache-dtype",
            "fp8",
            "--enforce-eager",
            "--max-num-seqs",
            "8",
            "--tensor-parallel-size=2",
            "--port",
            "8080",
            "--trust-remote-code",
        ]
    )
    assert f.model == "/mnt/models/gemma-4-12B-it"
    assert f.max_model_len == 16384 and f.gpu_memory_utilization == 0.95
    assert f.kv_cache_dtype == "fp8" and f.enforce_eager and f.max_num_seqs == 8
    assert f.tensor_parallel_size == 2
    assert f.extra == ["--port", "8080", "--trust-remote-code"]
    assert parse_vllm_args(["--model", "m", "--max-model-len", "32k"]).max_model_len == 32768
    assert parse_vllm_args("--model=m --enforce-eager").enforce_eager


@pytest.mark.parametrize(
    "args",
    [
        ["--max-model-len", "lots"],
        ["--max-model-len=0"],
        ["--gpu-memory-utilization", "1.5"],
        ["--kv-cache-dtype", "fp3"],
        ["--max-model-len"],
        ["--tensor-parallel-size=-1"],
    ],
)
def test_parse_vllm_args_bad_values(args: list[str]) -> None:
    with pytest.raises(UserError):
        parse_vllm_args(args)


# --- start-up lines -----------------------------------------------------------------------------


def test_parse_vllm_startup_v1_wording() -> None:
    lines = [
        "INFO 05-29 19:07:48 [gpu_model_runner.py:1595] Model loading took 15.0099 GiB and 4.97 seconds",
        "INFO 05-29 19:08:01 [gpu_worker.py:227] Available KV cache memory: 52.41 GiB",
        "INFO 05-29 19:08:01 [kv_cache_utils.py:634] GPU KV cache size: 429,312 tokens",
        "INFO 05-29 19:08:01 [kv_cache_utils.py:637] "
        "Maximum concurrency for 131,072 tokens per request: 3.28x",
        "INFO 05-29 19:08:20 [gpu_model_runner.py:1992] Graph capturing finished in 19 secs, took 0.52 GiB",
    ]
    f = parse_vllm_startup(lines)
    assert f.model_loading_gib == pytest.approx(15.0099)
    assert f.kv_cache_tokens == 429312
    assert f.max_concurrency == pytest.approx(3.28) and f.max_concurrency_tokens == 131072
    assert f.available_kv_cache_gib == pytest.approx(52.41)
    assert f.cuda_graph_gib == pytest.approx(0.52)


def test_parse_vllm_startup_v0_wording() -> None:
    lines = [
        "INFO 08-01 10:00:00 model_runner.py:1025] Loading model weights took 14.9888 GB",
        "INFO 08-01 10:00:05 gpu_executor.py:122] # GPU blocks: 27749, # CPU blocks: 2048",
        "INFO 08-01 10:00:05 executor_base.py:110] Maximum concurrency for 8192 tokens per request: 54.20x",
        "\x1b[32mINFO\x1b[0m worker.py:262] Memory profiling takes 5.2 seconds. Total GPU memory: 79.19 GiB",
    ]
    f = parse_vllm_startup(lines)
    assert f.model_loading_gib == pytest.approx(14.9888)
    assert f.gpu_blocks == 27749
    assert f.kv_cache_tokens is None
    assert f.max_concurrency == pytest.approx(54.2) and f.max_concurrency_tokens == 8192
    assert f.total_gpu_memory_gib == pytest.approx(79.19)
    assert parse_vllm_startup(["nothing here"]) == parse_vllm_startup([])


# --- CLI ----------------------------------------------------------------------------------------


def test_cli_json_shape_for_the_reference_case(cli: Any) -> None:
    r = cli("plan", "google/gemma-4-12B-it", "--gpu", "nvidia-l4", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert list(doc) == [*SPEC_EXAMPLE, "kv_cache_tokens_range"]  # SPEC section 4, extended
    low, high = doc["kv_cache_tokens_range"]
    assert low <= doc["kv_cache_tokens"] <= high
    assert doc["fits"] is False
    assert doc["gpu"] == "nvidia-l4" and doc["gpu_memory_gib"] == pytest.approx(22.03)
    assert isinstance(doc["kv_cache_tokens"], int) and isinstance(doc["warnings"], list)


def test_cli_table_and_vllm_flags(cli: Any) -> None:
    r = cli(
        "plan",
        "RedHatAI/gemma-4-12B-it-FP8-Dynamic",
        "--gpu",
        "l4",
        "--max-model-len",
        "16384",
        "--kv-cache-dtype",
        "fp8",
    )
    assert r.returncode == 0, r.stderr
    assert "FITS" in r.stdout and "KV cache" in r.stdout


@pytest.mark.parametrize(
    "args,needle",
    [
        (["plan", "acme/nope", "--gpu", "l4"], "acme/nope"),
        (["plan", "google/gemma-4-12B-it", "--gpu", "quantum-9000"], "quantum-9000"),
        (["plan", "google/gemma-4-12B-it", "--gpu", "l4", "--max-model-len", "0"], "max-model-len"),
        (["plan", "google/gemma-4-12B-it", "--gpu", "l4", "--max-model-len", "9999999"], "limit"),
        (["plan", "google/gemma-4-12B-it", "--gpu-memory-gib", "-3"], "gpu-memory-gib"),
        (["plan", "google/gemma-4-12B-it", "--gpu", "l4", "--gpu-count", "0"], "gpu-count"),
        (["plan", "/nonexistent/config.json", "--gpu", "l4"], "no such file"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(args: list[str], needle: str, cli: Any) -> None:
    r = cli(*args)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    assert needle in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_parse_vllm_startup_real_lines_from_the_accuracy_table() -> None:
    v0 = parse_vllm_startup(
        [
            "INFO 02-26 09:54:02 model_runner.py:1115] Loading model weights took 5.2032 GB",
            "INFO 02-26 09:54:05 worker.py:267] the current vLLM instance can use total_gpu_memory (8.00GiB)"
            " x gpu_memory_utilization (0.70) = 5.60GiB",
            "INFO 02-26 09:54:05 worker.py:267] model weights take 5.20GiB; non_torch_memory takes 0.03GiB;"
            " PyTorch activation peak memory takes 1.42GiB; the rest of the memory reserved for KV Cache"
            " is -1.05GiB.",
            "INFO 02-26 09:54:05 executor_base.py:111] # cuda blocks: 0, # CPU blocks: 4681",
            "INFO 02-26 09:54:05 executor_base.py:116] Maximum concurrency for 4096 tokens per request:"
            " 0.00x",
        ]
    )
    assert v0.model_loading_gib == pytest.approx(5.2, abs=0.01)
    assert v0.total_gpu_memory_gib == pytest.approx(8.0)
    assert v0.non_torch_gib == pytest.approx(0.03) and v0.activation_peak_gib == pytest.approx(1.42)
    assert v0.available_kv_cache_gib == pytest.approx(-1.05)
    assert v0.gpu_blocks == 0 and v0.max_concurrency == 0.0
    old = parse_vllm_startup(
        [
            "Memory profiling results: total_gpu_memory=23.58GiB initial_memory_usage=15.34GiB "
            "peak_torch_memory=17.98GiB memory_usage_post_profile=15.35GiB non_torch_memory=0.35GiB "
            "kv_cache_size=2.89GiB gpu_memory_utilization=0.90",
            "# GPU blocks: 1478, # CPU blocks: 2048",
            "The model's max seq len (29000) is larger than the maximum number of tokens that can be stored"
            " in KV cache (23648). Try increasing `gpu_memory_utilization` or decreasing `max_model_len`",
        ]
    )
    assert old.total_gpu_memory_gib == pytest.approx(23.58) and old.available_kv_cache_gib == pytest.approx(
        2.89
    )
    assert old.gpu_blocks == 1478 and old.kv_cache_tokens == 23648 and old.max_model_len == 29000
    err = parse_vllm_startup(
        [
            "ValueError: To serve at least one request with the models's max seq len (262144), (62.00 GiB KV"
            " cache is needed, which is larger than the available KV cache memory (48.66 GiB). Based on the"
            " available memory, the estimated maximum model length is 205728. Try increasing"
        ]
    )
    assert err.kv_needed_gib == pytest.approx(62.0) and err.estimated_max_model_len == 205728
    assert err.max_model_len == 262144
    new = parse_vllm_startup(
        [
            "(EngineCore_DP0 pid=15098) INFO 02-12 08:33:42 [gpu_model_runner.py:4216] Model loading took"
            " 11.55 GiB memory and 1940.360672 seconds",
            "(APIServer pid=1) INFO 08-06 10:08:41 [model.py:1582] Using max model len 16384",
        ]
    )
    assert new.model_loading_gib == pytest.approx(11.55) and new.max_model_len == 16384


def test_vllm_version_changes_the_hybrid_token_report() -> None:
    flags = VllmFlags(max_model_len=32768, enforce_eager=True)  # no CUDA graphs (taken from 0.21)
    old = plan_capacity("google/gemma-4-31B-it", gpu="h200", flags=flags, vllm_version="0.20.0")
    new = plan_capacity("google/gemma-4-31B-it", gpu="h200", flags=flags, vllm_version="0.21.0")
    assert old.kv_cache_gib == pytest.approx(new.kv_cache_gib)
    assert new.kv_cache_tokens > 3 * old.kv_cache_tokens  # vllm-project/vllm#43308
    assert new.kv_cache_tokens == pytest.approx(new.max_concurrency * 32768, rel=0.01)
    with pytest.raises(UserError):
        plan_capacity("google/gemma-4-31B-it", gpu="h200", vllm_version="banana")


def test_cli_lists_and_vllm_version(cli: Any) -> None:
    r = cli("plan", "--list-gpus")
    assert r.returncode == 0 and "nvidia-l4" in r.stdout and "22.03" in r.stdout
    r = cli("plan", "--list-models")
    assert r.returncode == 0 and "google/gemma-4-12B-it" in r.stdout
    r = cli(
        "plan", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "a100-80gb", "--vllm-version", "0.6.4", "--json"
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["fits"] is True


def test_language_model_only_drops_the_towers() -> None:
    full = plan_capacity("google/gemma-4-31B-it", gpu="h100", flags=VllmFlags(max_model_len=8192))
    text = plan_capacity(
        "google/gemma-4-31B-it",
        gpu="h100",
        flags=parse_vllm_args(["--max-model-len=8192", "--language-model-only"]),
    )
    assert text.weights_gib < full.weights_gib - 0.5  # the 31B vision tower is ~0.55 B params


def test_published_totals_match_the_architecture_count() -> None:
    # google/gemma-4-31B-it: 31,273,088,876 parameters in the published safetensors.
    assert resolve_model("google/gemma-4-31B-it").num_params == 31_273_088_876
    # Published safetensors totals of the others, counted from their configs alone.
    assert resolve_model("meta-llama/Llama-3.1-8B-Instruct").num_params == 8_030_261_248
    assert resolve_model("Qwen/Qwen2.5-7B-Instruct").num_params == 7_615_616_512
    assert resolve_model("Qwen/Qwen3-8B").num_params == 8_190_735_360
    assert resolve_model("mistralai/Mistral-7B-Instruct-v0.3").num_params == 7_248_023_552


# --- configs as transformers loads them ---------------------------------------------------------

# google/gemma-3-12b-it's published config.json: its text_config omits vocab_size, head_dim,
# max_position_embeddings and the layer pattern (https://huggingface.co/google/gemma-3-12b-it).
GEMMA3_12B_CONFIG = json.loads((Path(__file__).parent / "data/configs/gemma-3-12b-it.json").read_text())


def test_a_sparse_published_config_takes_the_model_types_transformers_defaults() -> None:
    spec = spec_from_config(GEMMA3_12B_CONFIG, model_id="google/gemma-3-12b-it", source="test")
    assert spec.vocab_size == 262_208  # Gemma3TextConfig defaults
    assert spec.head_dim == 256  # not hidden_size / heads (240)
    assert spec.max_position_embeddings == 131_072
    assert spec.tie_word_embeddings
    kinds = spec.layer_kinds()
    assert kinds.count("full") == 8 and kinds[5] == "full" and kinds[0] == "sliding"  # 5:1 pattern
    assert spec.sliding_window == 1024
    assert any("transformers' gemma3_text defaults" in d for d in spec.derived)
    # A nested text_config without its own model_type takes the wrapper's text model type.
    sub = {k: v for k, v in GEMMA3_12B_CONFIG["text_config"].items() if k != "model_type"}  # type: ignore[union-attr]
    again = spec_from_config({**GEMMA3_12B_CONFIG, "text_config": sub}, model_id="x", source="test")
    assert again.vocab_size == 262_208 and again.head_dim == 256
    # Without a model type transformers knows, a missing vocab_size is still one clear error.
    with pytest.raises(UserError, match="vocab_size"):
        spec_from_config(
            {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4}, model_id="x", source="t"
        )


def test_a_model_type_vllm_does_not_serve_in_float16_is_unsupported_in_float16_only() -> None:
    """Gemma 3 asked for in float16 (vllm#15097's --dtype=half): not a fit, whatever the memory; bfloat16
    fits on the same GPU. Preflight turns down a plan that would set it."""
    from mcp_tools.capacity import parse_vllm_args

    spec = spec_from_config(GEMMA3_12B_CONFIG, model_id="google/gemma-3-12b-it", source="test")
    half = plan_capacity(spec, gpu="nvidia-h100-80gb", flags=parse_vllm_args(["--dtype=half"]), suggest=False)
    assert half.binding_constraint == "unsupported" and "does not support float16" in half.unsupported[0]
    bf16 = plan_capacity(
        spec, gpu="nvidia-h100-80gb", flags=parse_vllm_args(["--dtype=bfloat16"]), suggest=False
    )
    assert bf16.binding_constraint != "unsupported"


def test_auto_dtype_serves_a_float16_refusing_type_in_float32_on_a_gpu_without_bfloat16() -> None:
    """vLLM's _resolve_auto_dtype leaves float16 out for Gemma 2/3 and takes the first dtype left: on a T4
    (no bfloat16) that is float32, twice float16's weight bytes. A plan for --dtype half there suggests
    float32, not the float16 it refuses, and a plan for bfloat16 suggests float32 too."""
    from mcp_tools.capacity import parse_vllm_args

    gemma = spec_from_config(GEMMA3_12B_CONFIG, model_id="google/gemma-3-12b-it", source="test")
    auto = plan_capacity(gemma, gpu="t4", suggest=False)
    assert auto.dtype == "float32"
    assert any("in float32 under --dtype auto" in w for w in auto.warnings)
    qwen = plan_capacity("Qwen/Qwen2.5-7B-Instruct", gpu="t4", suggest=False)
    assert qwen.dtype == "float16"  # a type that takes float16 keeps vLLM's cast
    on_l4 = plan_capacity(gemma, gpu="l4", suggest=False)
    assert on_l4.dtype == "bfloat16"
    assert auto.weights_gib > 1.9 * on_l4.weights_gib - 1  # four bytes a parameter, the 16-bit tower aside
    for asked in ("--dtype=half", "--dtype=bfloat16"):
        plan = plan_capacity(gemma, gpu="t4", flags=parse_vllm_args([asked]))
        assert plan.binding_constraint == "unsupported"
        assert [s.change for s in plan.suggestions if s.kind == "set_vllm_args"][0] == {"--dtype": "float32"}


def test_the_gemma3_vision_tower_and_projector_are_counted_as_vllm_builds_them() -> None:
    spec = spec_from_config(GEMMA3_12B_CONFIG, model_id="google/gemma-3-12b-it", source="test")
    # The published safetensors total: decoder + SigLIP (416,866,032) + projector (1152 x 3840 + 1152).
    assert spec.num_params == 12_187_325_040
    assert spec.tower_params == {"image": 416_866_032 + 1152 * 3840 + 1152}
    # The tower stays 16-bit in a quantized checkpoint: an FP8 checkpoint saves only decoder bytes.
    plain = plan_capacity(spec, gpu="h100", flags=VllmFlags(max_model_len=8192))
    fp8 = plan_capacity(spec, gpu="h100", flags=VllmFlags(max_model_len=8192, quantization="fp8"))
    assert fp8.weights_gib > plain.weights_gib / 2 + spec.tower_params["image"] / 2**30


def test_the_rope_cos_sin_caches_count_with_the_weights() -> None:
    """vLLM registers each distinct rotary embedding's cos/sin table as a buffer in the model dtype.
    Gemma 3 12B: the global layers' linear x8 RoPE caches 131,072 x 8 positions x 256, the local
    layers' default RoPE 131,072 x 256: 0.5625 GiB in bf16 ("Model loading took 23.31 GiB" on vLLM
    0.19 against 22.70 GiB of parameters)."""
    spec = spec_from_config(GEMMA3_12B_CONFIG, model_id="google/gemma-3-12b-it", source="test")
    assert sorted(spec.rope_caches()) == [(131_072, 256), (1_048_576, 256)]
    plan = plan_capacity(spec, gpu="h100", flags=VllmFlags(max_model_len=8192))
    assert plan.weights_gib == pytest.approx(spec.num_params * 2 / 2**30 + 0.5625, abs=0.01)
    # Replicated, not sharded: at TP 2 each GPU holds half the parameters and the whole table.
    tp2 = plan_capacity(spec, gpu="h100", gpu_count=2, flags=VllmFlags(max_model_len=8192))
    assert tp2.weights_gib == pytest.approx(spec.num_params / 2**30 + 0.5625, abs=0.01)
    # One table when every layer shares the rotary embedding (Llama 3.1: 131,072 x 128).
    assert resolve_model("meta-llama/Llama-3.1-8B-Instruct").rope_caches() == [(131_072, 128)]
    # YaRN caches original_max_position x factor (gpt-oss: 4,096 x 32) over the rotated dims.
    yarn = spec_from_config(
        {
            "model_type": "qwen2",
            "hidden_size": 1024,
            "num_hidden_layers": 2,
            "num_attention_heads": 8,
            "partial_rotary_factor": 0.5,
            "rope_scaling": {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 4096},
        },
        model_id="x",
        source="t",
    )
    assert yarn.rope_caches() == [(131_072, 64)]


def test_a_zero_image_limit_skips_the_vision_tower() -> None:
    spec = spec_from_config(GEMMA3_12B_CONFIG, model_id="google/gemma-3-12b-it", source="test")
    tower_gib = spec.tower_params["image"] * 2 / 2**30
    full = plan_capacity(spec, gpu="h100", flags=parse_vllm_args("--max-model-len 8192"))
    for args in (
        ["--limit-mm-per-prompt", '{"image": 0}'],
        ["--limit-mm-per-prompt", '{"image": {"count": 0}}'],
        ["--limit-mm-per-prompt=image=0,video=0"],
        ["--limit-mm-per-prompt.image", "0"],
    ):
        text = plan_capacity(spec, gpu="h100", flags=parse_vllm_args(["--max-model-len", "8192", *args]))
        assert text.weights_gib == pytest.approx(full.weights_gib - tower_gib, abs=0.01), args
    # An image limit above zero, another modality's zero, or a release before 0.12 keeps it.
    for args in (["--limit-mm-per-prompt", '{"image": 2}'], ["--limit-mm-per-prompt", "audio=0"]):
        kept = plan_capacity(spec, gpu="h100", flags=parse_vllm_args(["--max-model-len", "8192", *args]))
        assert kept.weights_gib == full.weights_gib, args
    old = plan_capacity(
        spec, gpu="h100", flags=parse_vllm_args("--limit-mm-per-prompt image=0"), vllm_version="0.11.0"
    )
    assert old.weights_gib == plan_capacity(spec, gpu="h100", vllm_version="0.11.0").weights_gib


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{image", "not valid JSON"),
        ("[0]", "not a JSON object"),
        ("image", "not modality=count"),
        ("image=x", "not an integer"),
        ('{"image": -1}', "must not be negative"),
    ],
)
def test_a_bad_mm_limit_is_one_clear_error(value: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        parse_vllm_args(["--limit-mm-per-prompt", value])


def test_an_explicit_null_in_a_published_config_is_kept() -> None:
    cfg = {
        "model_type": "mistral",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "sliding_window": None,  # as Mistral-7B-Instruct-v0.2+ publish it
    }
    spec = spec_from_config(cfg, model_id="x", source="t")
    assert spec.sliding_window is None and set(spec.layer_kinds()) == {"full"}
    assert spec.vocab_size == 32_000  # MistralConfig default


# --- memory held by other processes -------------------------------------------------------------

REFUSAL = (
    "(EngineCore_0 pid=1) ERROR 06-30 13:53:19 [core.py:515] ValueError: Free memory on device "
    "(31.44/47.38 GiB) on startup is less than desired GPU memory utilization (0.95, 45.01 GiB). "
    "Decrease GPU memory utilization or reduce GPU memory used by other processes."
)  # vllm-project/vllm#20305 (vLLM 0.9.1)


def test_the_start_up_line_showing_memory_in_use_is_read_across_wordings() -> None:
    got = parse_gpu_memory_in_use(["INFO starting", REFUSAL])
    assert got is not None
    assert (got.free_gib, got.total_gib, got.used_by_others_gib) == (31.44, 47.38, 15.94)
    assert (got.gpu_memory_utilization, got.requested_gib) == (0.95, 45.01)
    # Later releases name the device (pytorch/pytorch#175666).
    named = parse_gpu_memory_in_use(
        [
            "ValueError: Free memory on device cuda:0 (19.77/22.05 GiB) on startup is less than desired "
            "GPU memory utilization (0.9, 19.84 GiB)."
        ]
    )
    assert named is not None and named.used_by_others_gib == 2.28 and named.requested_gib == 19.84
    # V0 / V1 profiler drift: memory another process freed or took while vLLM profiled.
    drift = parse_gpu_memory_in_use(
        [
            "AssertionError: Error in memory profiling. Initial free memory 20.5 GiB, current free memory "
            "18.2 GiB. This happens when the GPU memory was not properly cleaned up before initializing "
            "the vLLM instance."
        ]
    )
    assert drift is not None and drift.used_by_others_gib == 2.3 and drift.free_gib == 18.2
    # More free than at the start: a co-tenant released memory mid-profile; nothing is held.
    released = "Initial free memory 62.7 GiB, current free memory 63.1 GiB. This happens when other processes"
    assert parse_gpu_memory_in_use([f"AssertionError: Error in memory profiling. {released}"]) is None
    assert parse_gpu_memory_in_use(["INFO GPU KV cache size: 10 tokens"]) is None
    # 0.10's informational wording after a normal start-up: free above what was desired, no cause.
    info = (
        "Free memory on device (43.93/44.42 GiB) on startup. Desired GPU memory utilization is "
        "(0.9, 39.98 GiB). Actual usage is 27.72 GiB for weight"
    )
    assert parse_gpu_memory_in_use([info]) is None
    short = parse_gpu_memory_in_use([info.replace("43.93/44.42", "30.10/44.42")])
    assert short is not None and short.used_by_others_gib == 14.32


def test_memory_held_by_other_processes_is_an_input_with_each_releases_semantics() -> None:
    # The refused start-up itself: the planner, told what the line says, refuses too.
    seen = parse_gpu_memory_in_use([REFUSAL])
    assert seen is not None and seen.used_by_others_gib is not None
    flags = parse_vllm_args(["--gpu-memory-utilization", "0.95", "--max-model-len", "8192"])
    p = plan_capacity(
        "meta-llama/Llama-3.1-8B-Instruct",
        gpu_memory_gib=seen.total_gib,
        flags=flags,
        vllm_version="0.9.1",
        gpu_memory_used_gib=seen.used_by_others_gib,
    )
    assert not p.fits and p.binding_constraint == "memory_in_use"
    assert "other processes hold 15.94 GiB" in p.verdict
    fix = p.suggestions[0]
    assert fix.fits and fix.change == {"--gpu-memory-utilization": 0.65}
    # Before 0.6.5 the budget was a share of the whole device: the other memory shrinks the cache.
    l4 = parse_vllm_args(["--max-model-len", "8192"])

    def llama_on_l4(version: str, used_gib: float | None = None) -> CapacityPlan:
        return plan_capacity(
            "meta-llama/Llama-3.1-8B-Instruct",
            gpu="nvidia-l4",
            flags=l4,
            vllm_version=version,
            gpu_memory_used_gib=used_gib,
        )

    old, old_used = llama_on_l4("0.5.0"), llama_on_l4("0.5.0", 1)
    assert old_used.kv_cache_gib == pytest.approx(old.kv_cache_gib - 1, abs=0.01) and old_used.fits
    # From 0.6.5 it is this instance's budget: memory that fits beside it changes nothing.
    new, new_used = llama_on_l4("0.6.5"), llama_on_l4("0.6.5", 1)
    assert new_used.kv_cache_gib == new.kv_cache_gib and new_used.fits
    with pytest.raises(UserError, match="gpu-memory-used-gib"):
        plan_capacity("meta-llama/Llama-3.1-8B-Instruct", gpu="nvidia-l4", gpu_memory_used_gib=-1)
    with pytest.raises(UserError, match="gpu-memory-used-gib"):
        plan_capacity("meta-llama/Llama-3.1-8B-Instruct", gpu="nvidia-l4", gpu_memory_used_gib=30)


def test_cli_takes_the_memory_other_processes_hold(cli: Any) -> None:
    r = cli(
        "plan", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "nvidia-l4", "--max-model-len", "8192",
        "--gpu-memory-used-gib", "3", "--json",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["fits"] is False and "other processes hold 3.00 GiB" in doc["verdict"]
    r = cli("plan", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "nvidia-l4", "--gpu-memory-used-gib", "-2")
    assert r.returncode == 2 and "Traceback" not in r.stderr


# --- uncertainty ---------------------------------------------------------------------------------


def test_fits_is_judged_at_the_pessimistic_end_of_the_range() -> None:
    model = "RedHatAI/gemma-4-12B-it-FP8-Dynamic"
    safe = plan_capacity(model, gpu="nvidia-l4", suggest=False).max_model_len_that_fits
    assert safe > 0
    p = plan_capacity(model, gpu="nvidia-l4", flags=parse_vllm_args(["--max-model-len", str(safe + 2048)]))
    low, high = p.kv_cache_tokens_range
    assert low < p.kv_cache_tokens < high
    assert p.fits_expected and not p.fits  # fits only optimistically: preflight must refuse it
    assert p.binding_constraint == "kv_cache" and p.verdict.startswith("does not fit safely")
    assert p.suggestions and p.suggestions[0].fits
    ok = plan_capacity(model, gpu="nvidia-l4", flags=parse_vllm_args(["--max-model-len", str(safe)]))
    assert ok.fits and ok.fits_expected
