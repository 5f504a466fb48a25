"""Vertex AI: the environment a job runs in, tuning reports, job submission."""
