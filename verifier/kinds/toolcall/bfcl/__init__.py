"""Importing BFCL v4 files as toolcall suites: function schemas, possible answers, answer options."""
