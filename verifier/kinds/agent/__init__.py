"""The ``agent`` kind: long-horizon scenarios in deterministic environments, scored per trial and per step."""
