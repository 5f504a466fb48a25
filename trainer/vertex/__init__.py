"""Vertex AI as the platform a job runs on: its environment (AIP_* variables, the cluster spec) as
pure functions, Google Cloud credentials and API errors, a TPU VM's libtpu, and the services a
training run reports to (hyperparameter tuning, Vertex AI Experiments). Ground floor: nothing here
needs more than the config and the task kinds; submitting and deploying jobs is trainer.cloud's."""
