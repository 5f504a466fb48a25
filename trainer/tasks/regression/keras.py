"""Regression's Keras pieces: the output layer that maps standardized predictions back to the
labels' units, and the loss measured in training-label standard deviations."""

import tensorflow as tf
import tf_keras


class Destandardize(tf_keras.layers.Layer):
    """z -> z * std + mean, in float32; mean and std are part of the saved config and weights."""

    def __init__(self, mean: float, std: float, **kwargs):
        super().__init__(dtype="float32", **kwargs)
        self.mean, self.std = float(mean), float(std)

    def call(self, z):
        return tf.cast(z, tf.float32) * self.std + self.mean

    def get_config(self):
        return {**super().get_config(), "mean": self.mean, "std": self.std}


class StandardizedMSE(tf_keras.losses.Loss):
    """Mean squared error measured in training-label standard deviations."""

    def __init__(self, std: float, name="standardized_mse", **kwargs):
        super().__init__(name=name, **kwargs)
        self.std = float(std)

    def call(self, y_true, y_pred):
        y_pred = tf.reshape(tf.cast(y_pred, tf.float32), [-1])
        y_true = tf.reshape(tf.cast(y_true, tf.float32), [-1])
        return tf.square((y_pred - y_true) / self.std)

    def get_config(self):
        return {**super().get_config(), "std": self.std}
