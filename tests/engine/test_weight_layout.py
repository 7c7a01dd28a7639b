"""CPU linear weights are stored input-major (reference_engine/loader.py, `_Builder.dense`) and compute the same.

The layout is a speed choice only: the weights keep their [out, in] shape and values, so the engine must answer as
it does with the checkpoint's row-major layout (the same greedy tokens, logprobs equal to float rounding).
"""

from __future__ import annotations

import torch

from reference_engine.model import WLinear
from reference_engine.sequence import SamplingParams

from .conftest import Collector, make_engine


def dense_linears(model: torch.nn.Module) -> list[WLinear]:
    return [m for m in model.modules() if isinstance(m, WLinear) and m.weight is not None]


def test_cpu_weights_are_input_major_except_a_tied_head(ckpt_factory):
    eng = make_engine(ckpt_factory("llama"))
    lins = dense_linears(eng.model)
    assert len(lins) == 4 * eng.model_config.num_layers + 1            # qkv, o, gate_up, down per layer; head
    for lin in lins:
        assert lin.weight is not None and lin.weight.t().is_contiguous() and not lin.weight.is_contiguous()
    tied = make_engine(ckpt_factory("llama", tie=True))
    head = tied.model.lm_head.decode.weight
    assert head is not None and head.data_ptr() == tied.model.embed_tokens.weight.data_ptr()


def test_input_major_weights_answer_as_row_major_ones(llama_ckpt):
    relaid = make_engine(llama_ckpt)
    row_major = make_engine(llama_ckpt)
    for lin in dense_linears(row_major.model):
        assert lin.weight is not None
        lin.weight.data = lin.weight.data.contiguous()
    runs = []
    for eng in (relaid, row_major):
        cols = [Collector() for _ in range(4)]
        for i, c in enumerate(cols):                 # batch of 4 decode rows, and a single row at the end
            eng.submit(f"r{i}", list(range(3 + i, 20 + 3 * i)),
                       SamplingParams(temperature=0, max_tokens=10 + 6 * i, ignore_eos=True, logprobs=True), c)
        eng.run_until_idle()
        runs.append(cols)
    for a, b in zip(*runs):
        assert a.tokens == b.tokens and len(a.tokens) > 0
        assert max(abs(x.logprob - y.logprob) for x, y in zip(a.choices, b.choices)) < 1e-4
