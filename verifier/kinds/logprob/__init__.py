"""The ``logprob`` kind: KL divergence between an endpoint's token distributions and the reference's (issue #6).

Modules: ``kind`` (the SuiteKind: probe, generate, forced paths), ``scoring`` (records -> KL results), ``tracks``
(a record read back as a token track), ``estimator`` (top-k KL with a union + tail bucket, exact KL), ``stats``
(llama.cpp-style statistics), ``align`` (token alignment), ``probe`` (which logprob method an endpoint supports),
``fingerprint`` (closest known quantization profile; calibration runs live in ``verifier.run.calibrate``).
"""
