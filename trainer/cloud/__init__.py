"""Vertex AI jobs, driven from outside: submitting training and tuning jobs, their scheduling,
deploys and batch prediction, the pipeline. What a running job sees of Vertex is trainer.vertex."""
