"""``python -m sandbox.vllm_sim``: one simulated vLLM server on a port."""

from __future__ import annotations

import logging

from sandbox.vllm_sim import __doc__ as _DOC
from sandbox.vllm_sim.app import VllmSim
from sandbox.vllm_sim.config import SimConfig


def main(argv: list[str] | None = None) -> None:
    import argparse

    import uvicorn

    p = argparse.ArgumentParser(prog="python -m sandbox.vllm_sim", description=(_DOC or "").split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--served-model-name", default="sim-model")
    p.add_argument("--max-model-len", type=int, default=16384)
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--kv-cache-tokens", type=int, default=200_000)
    p.add_argument("--ttft-base-s", type=float, default=0.05)
    p.add_argument("--prefill-s-per-token", type=float, default=0.0)
    p.add_argument("--itl-s", type=float, default=0.02)
    p.add_argument("--time-scale", type=float, default=1.0)
    p.add_argument("--container-concurrency", type=int, default=None)
    p.add_argument("--zero-latency", action="store_true")
    a = p.parse_args(argv)
    # every option but where to listen is a SimConfig field of the same name
    cfg = SimConfig.model_validate({k: v for k, v in vars(a).items() if k in SimConfig.model_fields})
    logging.basicConfig(level=logging.WARNING)
    uvicorn.run(
        VllmSim(cfg).app, host=a.host, port=a.port, log_level="warning", access_log=False, backlog=4096
    )


if __name__ == "__main__":
    main()
