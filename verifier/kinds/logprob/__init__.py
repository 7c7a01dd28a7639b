"""KL divergence between an endpoint's token distributions and the reference's (issue #6).

Modules: ``estimator`` (top-k KL with a union + tail bucket, exact KL), ``stats`` (llama.cpp-style
statistics), ``align`` (token alignment), ``probe`` (which logprob method an endpoint supports),
``fingerprint`` (closest known quantization profile), ``suite`` (the ``logprob`` SuiteKind).
"""
