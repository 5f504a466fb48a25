"""The model outside TensorFlow (issue #66): ONNX copies of a model beside its float32 SavedModel
(MODEL_DIR), each a folder that can be copied alone and served by ONNX Runtime, `tokenizers`
and numpy, with no TensorFlow installed:

    MODEL_DIR/onnx/        model.onnx       float32 graph: token features in, the task's outputs out
                           tokenizer.json   read by the `tokenizers` library (Hugging Face)
                           packing.json     how token pieces become features (packing.py)
                           onnx.json        graph facts; written last: marks the copy complete
    MODEL_DIR/onnx-int8/   the same four files, model.onnx int8 (dynamic quantization)

model.onnx takes `input_word_ids`, `input_mask` and `input_type_ids`, int32 [batch, seq] (with
--long-texts windows seq is max_windows * max_seq_length, the windows side by side, as the
SavedModel's `tokenize` returns them) and returns exactly the outputs of the SavedModel's
`predict_tokens`: temperature, thresholds and label strings are inside the graph.

tokenizer.json and packing.json are written by tokenizer_files.py (at export, TensorFlow
present) and read by packing.py (no TensorFlow): together they give features equal to the
SavedModel's `tokenize`. onnx.json ({"format", "precision", "outputs", "inputs", "pair",
"padded_lengths", "task_outputs", "opset", "tf2onnx", "onnxruntime", "float_nodes"}) is written
by the export and read by the runtime (runtime.py). A tagger's model.onnx is its network alone
(every token's `logits`), with tagging.json beside: tasks/tagging/onnx_copy.py reads the words, windows and
entities around it, as the tagger's SavedModel does in TensorFlow string ops. --encoder-backend
hub is not converted.
"""
