"""``POST /v1/x/distributions``: exact next-token distributions (float32 log-softmax rows), two ways.

* teacher-forced through PREFILL (``start``): one forward pass over the prompt; row i predicts token start+i;
* teacher-forced through DECODE (``forced_token_ids``, :mod:`reference_engine.forced`): the prompt is prefilled,
  then each forced token goes through a decode step, exactly as generated tokens do (decode weights, the KV cache
  format); row i predicts forced token i. This is the only way a decode-only quantization is measured on every
  position of a continuation, not just up to where greedy outputs diverge.

Its own module so the server stays one route table; the contract is in docs/CONTRACTS.md.
"""

from __future__ import annotations

import asyncio
import base64
from typing import TYPE_CHECKING

import numpy as np
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from reference_engine.protocol import DistributionRequest, first_error
from reference_engine.sequence import SamplingParams
from reference_engine.wire import ApiError, error_response

if TYPE_CHECKING:
    from reference_engine.server import Server


async def distributions(srv: Server, raw: bytes) -> Response:
    try:
        req = await asyncio.to_thread(DistributionRequest.model_validate_json, raw)
    except ValidationError as e:
        msg, param = first_error(e)
        raise ApiError(400, msg, param=param) from None
    srv._check_model(req.model)
    if req.prompt_token_ids is not None:
        ids = req.prompt_token_ids
    else:
        srv._check_length(req.prompt or "")
        ids = await asyncio.to_thread(srv.tok.encode, req.prompt or "", add_special_tokens=True)
    forced = req.forced_token_ids
    if forced is not None:
        vocab = srv.engine.model_config.vocab_size
        if bad := [i for i, t in enumerate(forced) if not 0 <= t < vocab][:1]:
            raise ApiError(400, f"token id {forced[bad[0]]} is outside the vocabulary",
                           param=f"forced_token_ids.{bad[0]}")
        params = SamplingParams(temperature=0.0, max_tokens=len(forced), ignore_eos=True,
                                forced_tokens=tuple(forced))
    else:
        if req.start >= len(ids):
            raise ApiError(400, f"'start' ({req.start}) must be below the number of prompt tokens ({len(ids)})",
                           param="start")
        params = SamplingParams(temperature=0.0, max_tokens=0, full_distribution_from=req.start)
    rid, q = srv._submit(list(ids), params)
    gen, _ = await srv._collect(rid, q, [])      # aborts the request if cancelled
    if gen.error:
        return error_response(gen.error.status, gen.error.message, gen.error.type, code=gen.error.code)
    if gen.distribution is None:  # the engine sends one for every request with full_distribution_from / forced
        raise RuntimeError("the engine returned no distribution")
    arr = gen.distribution.logprobs.numpy().astype("<f4")
    return JSONResponse({"vocab_size": int(arr.shape[1]), "token_ids": list(ids) + list(forced or []),
                         "path": "decode" if forced is not None else "prefill",
                         "logprobs_b64": base64.b64encode(np.ascontiguousarray(arr).tobytes()).decode(),
                         "shape": [int(arr.shape[0]), int(arr.shape[1])]})
