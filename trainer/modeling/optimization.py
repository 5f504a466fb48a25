"""The BERT fine-tuning recipe: AdamW, linear warm-up then linear decay, global-norm clipping."""
import tensorflow as tf
import tf_keras

# Variable names that get no weight decay: LayerNorm scales/offsets and biases, both in our
# native encoder and in TF-Hub encoders (e.g. "embeddings_ln/gamma:0").
NO_DECAY = ["bias", "gamma", "beta", "LayerNorm", "layer_norm"]


class WarmupLinearDecay(tf_keras.optimizers.schedules.LearningRateSchedule):
    """0 -> peak over `warmup_steps`, then linearly to 0 at `total_steps` (global steps)."""

    def __init__(self, peak: float, warmup_steps: int, total_steps: int):
        self.peak, self.warmup_steps, self.total_steps = peak, warmup_steps, max(1, total_steps)

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        warmup = tf.cast(max(1, self.warmup_steps), tf.float32)
        decay_span = tf.cast(max(1, self.total_steps - self.warmup_steps), tf.float32)
        rising = self.peak * (step + 1.0) / warmup
        falling = self.peak * tf.maximum(0.0, (self.total_steps - step) / decay_span)
        return tf.where(step < self.warmup_steps, rising, falling)

    def get_config(self):
        return {"peak": self.peak, "warmup_steps": self.warmup_steps, "total_steps": self.total_steps}


class AdamW(tf_keras.optimizers.AdamW):
    """tf_keras' AdamW with each dense update done by one fused kernel, ResourceApplyAdam.

    Keras computes Adam as about a dozen element-wise ops per variable, each one more pass over
    the weights and both moment slots; the kernel computes the same update (the epsilon-hat
    form Keras uses too: var -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)) in one.
    Weight decay, sparse gradients (an embedding table) and amsgrad keep Keras' own path.
    """

    def update_step(self, gradient, variable):
        if isinstance(gradient, tf.IndexedSlices) or self.amsgrad:
            return super().update_step(gradient, variable)
        dtype = variable.dtype
        step = tf.cast(self.iterations + 1, dtype)
        beta_1, beta_2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
        index = self._index_dict[self._var_key(variable)]
        return tf.raw_ops.ResourceApplyAdam(
            var=variable.handle, m=self._momentums[index].handle,
            v=self._velocities[index].handle, beta1_power=tf.pow(beta_1, step),
            beta2_power=tf.pow(beta_2, step), lr=tf.cast(self.learning_rate, dtype),
            beta1=beta_1, beta2=beta_2, epsilon=tf.cast(self.epsilon, dtype), grad=gradient)


def build_optimizer(learning_rate: float, total_steps: int, warmup_fraction: float,
                    weight_decay: float, clip_norm: float) -> tf_keras.optimizers.Optimizer:
    schedule = WarmupLinearDecay(learning_rate, int(total_steps * warmup_fraction), total_steps)
    optimizer = AdamW(
        learning_rate=schedule, weight_decay=weight_decay, beta_1=0.9, beta_2=0.999,
        epsilon=1e-6, global_clipnorm=clip_norm or None)
    optimizer.exclude_from_weight_decay(var_names=NO_DECAY)
    return optimizer
