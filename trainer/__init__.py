"""vertex-bert-trainer: fine-tune BERT-family encoders for text classification.

Importing the package sets up the TensorFlow environment once, before TensorFlow itself is
imported anywhere: tensorflow-hub layers are Keras 2 layers, so `tf.keras` must resolve to
tf-keras (TF_USE_LEGACY_KERAS=1) rather than Keras 3, and a normal run should not print a wall
of C++ start-up warnings. Users may override either variable.
"""
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

__version__ = "0.1.0"
