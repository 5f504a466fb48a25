"""Subword tokenizers that run as TensorFlow ops, so exported models still take raw strings."""
