"""A tagger's LiteRT int8 copy (trainer/serving/tflite.py's network, run by LiteRT) around its
float32 export's word splitting and entities (tasks/tagging/export.py): the unit's int8_module."""

import numpy as np

from trainer.modeling.encoders.layers import INPUT_KEYS
from trainer.serving.tflite import Int8Network, Signature, float32_functions


class Int8TaggingModule:
    """A tagger's int8 model (tasks/tagging/export.py's export): the float32 export splits the words
    and tokenizes them (its `tokenize`) and turns the logits into entities (its `outputs`); the
    tagger between runs in LiteRT. It answers through `signatures`, as the float32 one does."""

    def __init__(self, float32_module, flatbuffers: dict):
        from trainer.serving import export

        float32_functions(float32_module)
        self.float32 = float32_module
        self._network = Int8Network(flatbuffers)
        self.signatures = {export.SIGNATURE: Signature(self.serve, float32_module.signatures[export.SIGNATURE])}

    def serve(self, text):
        from trainer.tasks.tagging.export import WINDOWS_PER_CALL, WORD_FEATURES

        features = self.float32.tokenize(text)
        # On the windows' longest row, as the float32 export's serve runs (tasks/tagging/export.py),
        # as many windows per call: `outputs` reads each word's logits at its first piece, all
        # within that width. (An export from before windows has a row per text, and takes no
        # `word_window`.)
        width = int(np.max(np.sum(features["input_mask"], axis=1)))
        inputs = {name: features[name][:, :width] for name in INPUT_KEYS}
        logits = np.concatenate(
            [
                self._network.logits({name: value[start : start + WINDOWS_PER_CALL] for name, value in inputs.items()})
                for start in range(0, len(inputs["input_mask"]), WINDOWS_PER_CALL)
            ]
        )
        return self.float32.outputs(text, logits, *(features[name] for name in WORD_FEATURES if name in features))
