"""The built-in reference inference engine: the verifier's ground truth and its embedded default endpoint.

Shaped after nano-vllm, one job per module:
  config        ModelConfig (from an HF config.json) and EngineConfig (how to serve it)
  loader        safetensors -> model, fusing q/k/v and gate/up, converting to prefill / decode weight formats
  quant         INT4 group-wise weights (packed format shared with the Triton kernels)
  tokenizer     `tokenizers` wrapper: special tokens, token bytes, incremental detokenisation
  chat_template jinja2 rendering of the checkpoint's chat template, as transformers does it
  tool_parser   model text -> OpenAI tool calls (Hermes/Qwen `<tool_call>{...}</tool_call>`)
  model         Llama / Qwen2 / Qwen3 decoder over a paged KV cache
  kv_cache      the page pool (bf16/fp16/fp32/fp8 with per-page-per-head scales) and page tags
  block_manager page allocation, reference counts, prefix caching, tag assignment, fault injection (tests)
  scheduler     continuous batching, admission control (bounded wait -> 429/503), preemption by recompute
  sampler       greedy / temperature / top-p with per-request seeds, presence/frequency penalties; raw logprobs
  constraints   constrained decoding: forced tool calls and json_object (one JSON object), banned tokens
  kernels/      op dispatch: PyTorch (CPU, reference) or Triton (CUDA)
  engine        the step loop on its own thread; events back to each request
  protocol      strict validation of OpenAI request bodies (400 naming the field)
  server        FastAPI app: /v1/models, /v1/chat/completions, /v1/completions, /v1/x/distributions, /health, /metrics
  launch        start_server(): in-process server for `builtin:` endpoints and tests
  cli           `verifier serve`
  tiny_checkpoint  small random (or scripted) HF checkpoints for tests and benchmarks
"""
