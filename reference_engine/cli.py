"""`verifier serve`: the Typer-compatible command the core CLI registers (`app.command("serve")(serve)`)."""

from __future__ import annotations

from pathlib import Path

import typer


def serve(
    model: Path | None = typer.Option(None, "--model",
                                         help="HF checkpoint folder (default: the shipped verifier-tiny)"),
    kv_dtype: str = typer.Option("bf16", "--kv-dtype", help="KV cache dtype: bf16 | fp16 | fp32 | fp8"),
    weights: str = typer.Option("bf16", "--weights", "--prefill-weights",
                                help="prefill weights: bf16 | fp16 | fp32 | int4"),
    decode_weights: str | None = typer.Option(None, "--decode-weights",
                                                 help="decode weights (default: as --weights)"),
    no_prefix_cache: bool = typer.Option(False, "--no-prefix-cache", help="turn prefix caching off"),
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int = typer.Option(8000, "--port"),
    page_size: int = typer.Option(16, "--page-size", help="tokens per KV page"),
    kv_budget_mb: int | None = typer.Option(None, "--kv-budget-mb", help="KV pool size in MiB (default 64)"),
    device: str = typer.Option("cpu", "--device", help="cpu or cuda (Triton kernels are used on cuda)"),
    served_model_name: str | None = typer.Option(None, "--served-model-name", help="model id clients send"),
    max_request_mb: float = typer.Option(8.0, "--max-request-mb", min=0.001,
                                         help="largest request body accepted, in MiB (413 above)"),
) -> None:
    """Serve a model with the reference engine on an OpenAI-compatible HTTP API."""
    import uvicorn

    from reference_engine.config import ConfigError
    from reference_engine.launch import build_engine
    from reference_engine.server import create_app

    try:
        engine = build_engine(model, kv_dtype=kv_dtype, weights=weights, decode_weights=decode_weights,
                              prefix_cache=not no_prefix_cache, page_size=page_size,
                              kv_budget_bytes=kv_budget_mb * 1024 * 1024 if kv_budget_mb else None,
                              device=device, served_model_name=served_model_name)
    except (ConfigError, ValueError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    info = engine.pool.info()
    typer.echo(f"serving {engine.served_model_name} on http://{host}:{port}/v1  (weights {weights}/"
               f"{decode_weights or weights}, kv {kv_dtype}: {info.num_pages} pages x {info.page_size} = "
               f"{info.capacity_tokens} tokens, prefix cache {'off' if no_prefix_cache else 'on'})")
    engine.start()
    try:
        uvicorn.run(create_app(engine, max_request_bytes=int(max_request_mb * 1024 * 1024)), host=host, port=port,
                    log_level="info", access_log=False)
    finally:
        engine.stop()


def main() -> None:
    typer.run(serve)


if __name__ == "__main__":
    main()
