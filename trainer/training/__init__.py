"""Training: the run's stages, callbacks, distribution and evaluation."""
