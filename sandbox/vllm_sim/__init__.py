"""A simulated vLLM OpenAI-compatible endpoint: vLLM's wire format, synthetic replies, honest physics.

The sandbox mounts one of these per ready Cloud Run revision; tests and the benchmark engine talk to
it with real clients. Everything a client can observe follows vLLM (v0.9 - v0.11 wording):

- ``GET /health`` (200, empty), ``GET /v1/models`` (the served model; ``owned_by`` says the replies are
  synthetic), ``POST /v1/chat/completions`` and ``POST /v1/completions`` (SSE streaming with
  ``data: [DONE]``, ``stream_options.include_usage``; non-streaming with ``usage``), ``POST /tokenize``,
  ``GET /metrics`` (Prometheus text with vLLM's metric names).
- Tokenization is deterministic and cheap (:func:`tokenize`, about one token per word or per 4
  characters) and the same function drives ``/tokenize``, ``usage`` and the max-model-len check, so a
  client may rely on ``/tokenize`` being exact. Chat prompts go through a Gemma-style template.
- Physics: at most ``max_num_seqs`` sequences decode at once, the rest wait; KV usage is the sum of
  (prompt + generated) tokens over running sequences divided by ``kv_cache_tokens``; when a new token
  does not fit, the newest running sequence is preempted (it re-queues and recomputes its prefill).
  TTFT = queueing + ``ttft_base_s`` + ``prefill_s_per_token`` x prompt tokens, then one token every
  ``itl_s``, scheduled against absolute deadlines so latencies do not drift.
- ``zero_latency`` skips every sleep and answers a streaming request with its whole SSE body in one
  write: it measures clients, not the server.

The package's seams: ``config`` (``SimConfig``), ``tokenizer`` (tokens, the chat template, synthetic
replies), ``engine`` (the scheduler and KV accounting), ``metrics`` (vLLM's histograms and the
Prometheus collector), ``app`` (``VllmSim``, the ASGI app, faults acted out) and ``__main__``.

Run it standalone: ``python -m sandbox.vllm_sim --port 8000 [--zero-latency]``.
"""
