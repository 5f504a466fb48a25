"""The BERT fine-tuning recipe: AdamW, linear warm-up then linear decay, global-norm clipping,
and optionally layer-wise learning-rate decay."""

import re
from collections.abc import Sequence

import tensorflow as tf
import tf_keras

from trainer.modeling.encoders.layers import canonical_name

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
    """tf_keras' AdamW with a learning rate per variable, each update done by one fused kernel.

    Layer-wise learning-rate decay (ELECTRA's recipe, google-research/electra
    `model/optimization.py`) gives each variable a scale of the peak rate; weight decay is applied
    at that same rate, as there. Keras computes Adam as about a dozen element-wise ops per
    variable, each one more pass over the weights and both moment slots; ResourceApplyAdam
    computes the same update (the epsilon-hat form Keras uses too: var -= lr * sqrt(1 - b2^t) /
    (1 - b1^t) * m / (sqrt(v) + eps)) in one. A sparse gradient (a trained embedding table) is
    made dense first: Keras' sparse path decays both moments over the whole table anyway, and the
    dense one squares the summed gradient of a repeated token rather than summing its squares.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._rate_scales = {}

    def scale_learning_rates(self, scales: Sequence[tuple[tf.Variable, float]]) -> None:
        """(variable, scale of the peak learning rate) pairs; variables not named keep 1."""
        self._rate_scales = {self._var_key(variable): scale for variable, scale in scales}

    def _apply_weight_decay(self, variables):
        """Done in update_step instead, at each variable's own learning rate."""

    def update_step(self, gradient, variable):
        dtype = variable.dtype
        lr = tf.cast(self.learning_rate, dtype) * self._rate_scales.get(self._var_key(variable), 1.0)
        if self.weight_decay and self._use_weight_decay(variable):
            variable.assign_sub(variable * tf.cast(self.weight_decay, dtype) * lr)
        step = tf.cast(self.iterations + 1, dtype)
        beta_1, beta_2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
        index = self._index_dict[self._var_key(variable)]
        return tf.raw_ops.ResourceApplyAdam(
            var=variable.handle,
            m=self._momentums[index].handle,
            v=self._velocities[index].handle,
            beta1_power=tf.pow(beta_1, step),
            beta2_power=tf.pow(beta_2, step),
            lr=lr,
            beta1=beta_1,
            beta2=beta_2,
            epsilon=tf.cast(self.epsilon, dtype),
            grad=tf.convert_to_tensor(gradient),
        )


_LAYER = re.compile(r"^transformer/layer_(\d+)/")


def layer_rate_scales(variables: Sequence[tf.Variable], decay: float) -> list[tuple[tf.Variable, float]]:
    """decay ** (depth from the top) per encoder variable: layer-wise learning-rate decay.

    The top transformer layer gets `decay`, each one below another factor, the embeddings (and an
    embedding projection) the smallest; the pooler and the head keep the full rate. Variables
    are placed by their Model Garden names (layers.canonical_name), which native encoders and
    Model Garden's TF-Hub encoders share; a hub model named otherwise keeps one rate throughout.
    """
    if decay == 1.0:
        return []
    depths = []
    for variable in variables:
        name = canonical_name(variable.name)
        if name is None or name.startswith("pooler_transform"):
            continue
        layer = _LAYER.match(name)
        depths.append((variable, int(layer.group(1)) + 1 if layer else 0))
    if not depths:
        return []
    top = max(depth for _, depth in depths) + 1
    return [(variable, decay ** (top - depth)) for variable, depth in depths]


def build_optimizer(
    learning_rate: float,
    total_steps: int,
    warmup_fraction: float,
    weight_decay: float,
    clip_norm: float,
    variables: Sequence[tf.Variable] = (),
    layer_decay: float = 1.0,
) -> tf_keras.optimizers.Optimizer:
    """The recipe's AdamW; `variables` are placed for `layer_decay` (1.0: one rate for all)."""
    schedule = WarmupLinearDecay(learning_rate, int(total_steps * warmup_fraction), total_steps)
    optimizer = AdamW(
        learning_rate=schedule,
        weight_decay=weight_decay,
        beta_1=0.9,
        beta_2=0.999,
        epsilon=1e-6,
        global_clipnorm=clip_norm or None,
    )
    optimizer.exclude_from_weight_decay(var_names=NO_DECAY)
    optimizer.scale_learning_rates(layer_rate_scales(variables, layer_decay))
    return optimizer
