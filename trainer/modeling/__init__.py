"""Modeling: encoders (network + preprocessor), the task head, the optimizer."""
