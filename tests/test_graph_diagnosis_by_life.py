"""A failure no family's wording names, classified by where in the server's life it happened and what
kind of error it is (``graph.diagnosis.classify_by_life``): the kinds this round of the real corpus
taught (issue 11), each with the case that must not follow it."""

from __future__ import annotations

from graph.diagnosis import RootCause
from tests.test_graph_analyzers import cause as cause_of
from tests.test_graph_analyzers import obs


def cause(lines: list[str]) -> RootCause:
    """The root cause the analyzers give for these log lines (``tests.test_graph_analyzers``' helpers)."""
    return cause_of(obs(lines))


# A wrapper building vLLM's engine with an argument this vLLM no longer takes (Python's TypeError wording;
# the paste begins at the traceback, so no milestone gives the phase: the constructors on the stack do).
KWARG_AT_BUILD = [
    "Traceback (most recent call last):",
    '  File "/srv/worker.py", line 58, in __init__',
    "    self.llm = vllm.LLM(*args, **kwargs)",
    '  File "/usr/lib/python3.10/site-packages/vllm/entrypoints/llm.py", line 210, in __init__',
    "    engine_args = EngineArgs(",
    "TypeError: EngineArgs.__init__() got an unexpected keyword argument 'worker_use_ray'",
]
# The same kind of error raised handling a request: a bug of one code path, not the image's versions.
ATTR_SERVING = [
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3.12/site-packages/vllm/entrypoints/openai/serving_chat.py", line 198, in '
    "create_chat_completion",
    "    tool_parser = self.tool_parser(tokenizer)",
    '  File "/usr/lib/vllm/entrypoints/openai/tool_parsers/x.py", line 40, in __init__',
    "    self.bot_token_id = self.vocab.get(self.bot_token)",
    "AttributeError: 'CachedTokenizer' object has no attribute 'vocab'",
]


def test_an_argument_or_attribute_the_other_piece_lacks_at_build_time_is_unsupported_config() -> None:
    got = cause(KWARG_AT_BUILD)
    assert got.category == "unsupported_config"
    assert any("unexpected keyword argument 'worker_use_ray'" in e.text for e in got.evidence)
    module_attr = [
        '  File "/srv/fastchat/serve/vllm_worker.py", line 291, in <module>',
        "    worker = VLLMWorker(",
        '  File "/srv/fastchat/serve/vllm_worker.py", line 57, in __init__',
        "    self.tokenizer = llm_engine.engine.tokenizer",
        "AttributeError: 'AsyncLLM' object has no attribute 'engine'",
    ]
    assert cause(module_attr).category == "unsupported_config"


def test_the_same_words_under_a_request_handler_are_not_called_a_configuration() -> None:
    assert cause(ATTR_SERVING).category != "unsupported_config"
    # and under the engine's step loop (an offline run generating) neither
    stepping = [
        *KWARG_AT_BUILD[:3],
        '  File "/x/vllm/engine/llm_engine.py", line 1200, in step',
        *KWARG_AT_BUILD[3:],
    ]
    assert cause(stepping).category != "unsupported_config"


def test_a_checkpoint_tensor_the_model_class_has_no_place_for_is_unsupported_config() -> None:
    # vLLM's AutoWeightsLoader (model_executor/models/utils.py) while the weights load
    lines = [
        "INFO 04-03 10:02:11 [loader.py:447] Loading weights took 0.00 seconds",
        "INFO 04-03 10:02:10 [weight_utils.py:265] Using model weights format ['*.safetensors']",
        "Loading safetensors checkpoint shards:   0% Completed | 0/2 [00:00<?, ?it/s]",
        "Traceback (most recent call last):",
        '  File "/x/vllm/model_executor/models/utils.py", line 235, in _load_module',
        "    raise ValueError(msg)",
        "ValueError: There is no module or parameter named 'language_model' in Gemma3ForCausalLM",
    ]
    assert cause(lines).category == "unsupported_config"


def test_a_bare_assertion_error_is_read_with_the_assert_that_raised_it() -> None:
    # vLLM 0.6's config.py checking the model's rope_scaling block: no message, only the assert
    lines = [
        '  File "/x/vllm/entrypoints/openai/api_server.py", line 73, in model_is_embedding',
        "    return ModelConfig(model=model_name,",
        '  File "/x/vllm/config.py", line 227, in __init__',
        "    self.max_model_len = _get_and_verify_max_len(",
        '  File "/x/vllm/config.py", line 1740, in _get_and_verify_max_len',
        '    assert "factor" in rope_scaling',
        "AssertionError",
    ]
    got = cause(lines)
    assert got.category == "unsupported_config"
    assert [e.text for e in got.evidence][:2] == ['assert "factor" in rope_scaling', "AssertionError"]
    # a bare exception name that ends no traceback is no failure of its own
    assert cause(["INFO 01-01 00:00:00 server.py:1] retrying after", "AssertionError"]).category != (
        "unsupported_config"
    )


def test_the_configs_own_verify_checks_place_a_headless_traceback_in_the_config_phase() -> None:
    # vLLM 0.2's engine checking its parallel config (the paste begins inside the traceback)
    lines = [
        '  File "/x/vllm/engine/llm_engine.py", line 96, in __init__',
        "    self._verify_args()",
        '  File "/x/vllm/engine/llm_engine.py", line 187, in _verify_args',
        "    self.model_config.verify_with_parallel_config(self.parallel_config)",
        '  File "/x/vllm/config.py", line 123, in verify_with_parallel_config',
        "    raise ValueError(",
        "ValueError: Total number of attention heads (64) must be divisible by tensor parallel size (3).",
    ]
    assert cause(lines).category == "unsupported_config"
    # speculative decoding's _verify_tokens runs serving: a ValueError under it is no configuration
    # (a message no family's wording names, so that only the frames place it)
    serving = [
        '  File "/x/vllm/engine/llm_engine.py", line 1200, in step',
        "    outputs = self.model_executor.execute_model(",
        '  File "/x/vllm/spec_decode/spec_decode_worker.py", line 9, in _verify_tokens',
        "    raise ValueError(",
        "ValueError: the proposal's token ids (3) do not match the scores (4)",
    ]
    assert cause(serving).category != "unsupported_config"


def test_a_weights_file_that_cannot_be_read_while_loading_is_a_checkpoint_to_fetch_again() -> None:
    from graph.pipeline import assess

    lines = [
        "INFO 03-10 21:30:12 model_runner.py:1110] Starting to load model /models/Qwen2.5-VL-72B-AWQ...",
        "Loading safetensors checkpoint shards:  64% Completed | 7/11 [00:41<00:23,  5.90s/it]",
        "ERROR 03-10 21:30:59 engine.py:400] Traceback (most recent call last):",
        'ERROR 03-10 21:30:59 engine.py:400]   File "/x/w.py", line 463, in safetensors_weights_iterator',
        'ERROR 03-10 21:30:59 engine.py:400]     with safe_open(st_file, framework="pt") as f:',
        "ERROR 03-10 21:30:59 engine.py:400] safetensors_rust.SafetensorError: Error while deserializing "
        "header: InvalidHeaderDeserialization",
    ]
    got = cause(lines)
    assert got.category == "model_not_found"
    step = assess(obs(lines)).plan.steps[0]
    assert step.kind == "escalate" and "fetch it again" in step.change["human_action"]
    # the same words where nothing says the weights were loading do not decide a family
    assert cause(lines[2:]).category != "model_not_found"


def test_a_chain_ending_in_a_processor_that_cannot_process_the_start_ups_inputs_is_unsupported_config() -> (
    None
):
    chain = [
        "Traceback (most recent call last):",
        '  File "/x/transformers/models/qwen2_audio/processing_qwen2_audio.py", line 98, in __call__',
        "    num_audio_tokens = len(audios)",
        "TypeError: object of type 'NoneType' has no len()",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        '  File "/x/vllm/multimodal/processing.py", line 1021, in _call_hf_processor',
        "    raise RuntimeError(msg) from exc",
        "RuntimeError: Failed to apply Qwen2AudioProcessor on data={'text': '<|AUDIO|>'} with kwargs={}",
    ]
    loaded = "INFO 01-17 22:16:40 gpu_model_runner.py:872] Loading model weights took 15.6 GiB"
    assert cause([loaded, *chain]).category == "unsupported_config"
    # the same chain for one request of a server that is up is that request's input, not the start's
    up = "INFO:     Application startup complete."
    assert cause([loaded, up, *chain]).category != "unsupported_config"


def test_what_a_request_or_a_none_value_raises_is_not_called_a_configuration() -> None:
    # SamplingParams checks each request's own values in a function named like the config's checks
    per_request = [
        '  File "/x/vllm/entrypoints/openai/serving_chat.py", line 198, in create_chat_completion',
        "    sampling_params = request.to_sampling_params(",
        '  File "/x/vllm/sampling_params.py", line 300, in __post_init__',
        "    self._verify_args()",
        '  File "/x/vllm/sampling_params.py", line 350, in _verify_args',
        "    raise ValueError(",
        "ValueError: max_tokens must be at least 1, got 0.",
    ]
    assert cause(per_request).category != "unsupported_config"
    # a value that was None is the ordinary bug, not one piece lacking what another calls
    none_value = [
        '  File "/x/vllm/model_executor/model_loader/loader.py", line 40, in __init__',
        "    self.loader = param.weight_loader",
        "AttributeError: 'NoneType' object has no attribute 'weight_loader'",
    ]
    assert cause(none_value).category != "unsupported_config"
    # nor a client script's own top level
    client = [
        '  File "/home/u/client.py", line 12, in <module>',
        "    main()",
        '  File "/home/u/client.py", line 9, in main',
        "    print(r.json())",
        "AttributeError: 'Response' object has no attribute 'jsn'",
    ]
    assert cause(client).category != "unsupported_config"


def test_a_request_handlers_api_mismatch_while_another_instance_loads_is_not_the_start() -> None:
    loading = "INFO 03-01 10:00:00 [weight_utils.py:265] Using model weights format ['*.safetensors']"
    assert cause([loading, *ATTR_SERVING]).category != "unsupported_config"
    assert cause([loading, *KWARG_AT_BUILD]).category == "unsupported_config"


def test_the_command_lines_own_checks_place_a_failure_before_any_engine() -> None:
    """A paste that is only the traceback: ``validate_parsed_serve_args`` (v0.5 .. current) on its stack is
    the arguments being checked, so a path it cannot find is the model's files missing; the same words
    with no such frame name no phase, and stay unknown."""
    stack = [
        "Traceback (most recent call last):",
        '  File "/usr/lib/vllm/entrypoints/openai/api_server.py", line 2094, in <module>',
        "    validate_parsed_serve_args(args)",
        '  File "/usr/lib/vllm/entrypoints/openai/cli_args.py", line 289, in validate_parsed_serve_args',
        "    validate_chat_template(args.chat_template)",
    ]
    missing = (
        "ValueError: The supplied chat template string (/gcs/m/chat_template.jinja) appears path-like, "
        "but doesn't exist!"
    )
    assert cause([*stack, missing]).category == "model_not_found"
    assert cause(["Traceback (most recent call last):", missing]).category == "unknown"


def test_an_error_that_names_the_setting_to_change_is_a_refused_configuration() -> None:
    """Whatever step ran the check ("Please increase max_num_batched_tokens"); not when it was raised
    handling a request, and not a bare message with no setting named."""
    asks = [
        "Traceback (most recent call last):",
        '  File "/usr/lib/vllm/v1/core/encoder_cache_manager.py", line 302, in compute_mm_encoder_budget',
        "    raise ValueError(",
        "ValueError: Chunked MM input disabled but max_tokens_per_mm_item (2496) is larger than "
        "max_num_batched_tokens (2048). Please increase max_num_batched_tokens.",
    ]
    got = cause(asks)
    assert got.category == "unsupported_config"
    assert got.finding is not None and got.finding.facts["asked_setting"] == {
        "flag": "--max-num-batched-tokens",
        "to": 2496,
    }
    serving = [*ATTR_SERVING[:4], *asks[3:]]
    assert cause(serving).category == "unknown"
    assert cause([*asks[:3], "ValueError: Please try again later."]).category == "unknown"


def test_an_unplaced_failure_of_a_server_never_seen_up_was_raised_starting() -> None:
    """A paste of the exception alone: where the server was never seen up and the stack holds no request
    or step, the kinds that need no phase name the family; once it was seen serving, they do not."""
    attr = "(ApiServer_1 pid=359) AttributeError: 'Gemma4UnifiedVisionConfig' object has no attribute 'n'"
    assert cause([attr]).category == "unsupported_config"
    none = ["  File \"/x/vllm/attention/backends/flashinfer.py\", line 199, in _get_prefill_wrapper",
            "TypeError: 'NoneType' object is not callable"]  # fmt: skip
    assert cause(none).category == "unsupported_config"  # an optional import left the backend None
    up = "INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)"
    assert cause([up, attr]).category == "unknown"
    assert cause([up, *none]).category == "unknown"
    assert cause([*ATTR_SERVING]).category == "unknown"  # under a request handler: one code path's bug


def test_a_value_vllms_configuration_code_rejects_is_a_refused_setting_at_any_step_of_the_start() -> None:
    """Raised in ``kv_cache_utils.py`` while the KV cache is sized (after the weights loaded): a setting the
    configuration refused. The same ValueError from a model's own code there stays unexplained."""
    tag = "(Worker_TP0 pid=98743) ERROR 04-30 19:50:08 [multiproc_executor.py:949] "
    lines = [
        "INFO 04-30 19:49:01 [gpu_model_runner.py:1770] Model loading took 26.1 GiB memory",
        tag + "Traceback (most recent call last):",
        tag + '  File "/root/.venv/lib/python3.12/site-packages/vllm/v1/worker/gpu_worker.py", line 381, in '
        "determine_available_memory",
        tag + "    cudagraph_memory_estimate = self.model_runner.profile_cudagraph_memory()",
        tag
        + '  File "/root/.venv/lib/python3.12/site-packages/vllm/v1/core/kv_cache_utils.py", line 1216, in '
        "unify_hybrid_kv_cache_specs",
        tag + "    raise ValueError(",
        tag
        + "ValueError: Hybrid KV cache manager is disabled but failed to convert the KV cache specs to one "
        "unified type.",
    ]
    assert cause_of(obs(lines)).category == "unsupported_config"
    model_code = [
        x.replace("vllm/v1/core/kv_cache_utils.py", "vllm/model_executor/models/qwen3_next.py") for x in lines
    ]
    assert cause_of(obs(model_code)).category != "unsupported_config"


def test_a_keyerror_logged_by_its_message_alone_is_read_and_yields_to_its_named_line() -> None:
    """V0's engine process logs ``logger.exception(e)``: a KeyError prints as its quoted key, then the
    traceback. While the weights load, a dotted parameter path the model lacks is the checkpoint's."""
    head = "ERROR 06-20 23:20:13 engine.py:400] "
    lines = [
        "INFO 06-20 23:20:11 model_runner.py:902] Starting to load model /models/Qwen2.5-7B-Instruct-w8a8...",
        head + "'layers.0.mlp.gate_up_proj.deq_scale'",
        head + "Traceback (most recent call last):",
        head + '  File "/x/vllm/engine/multiprocessing/engine.py", line 391, in run_mp_engine',
    ]
    d = cause_of(obs(lines))
    assert d.category == "unsupported_config" and 2 in {e.line for e in d.evidence}
    named = [*lines, head + "KeyError: 'layers.0.mlp.gate_up_proj.deq_scale'"]
    assert 5 in {e.line for e in cause_of(obs(named)).evidence}


def test_a_librarys_own_attributeerror_subclass_at_the_start_is_pieces_that_do_not_fit() -> None:
    lines = [
        "vLLM: 0.27.0",
        "Transformers: 5.15.0",
        "transformers.integrations.heterogeneity.configuration_utils.AmbiguousGlobalPerLayerAttributeError:",
        "'head_dim' is a per-layer attribute and may vary across layers.",
    ]
    assert cause_of(obs(lines)).category == "unsupported_config"
    other = [*lines[:2], lines[2].replace("AttributeError:", "Error:"), lines[3]]
    assert cause_of(obs(other)).category == "unknown"
