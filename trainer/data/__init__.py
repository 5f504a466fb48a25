"""Data: reading and validating files, labels, splits, the tf.data pipeline, `trainer.prepare`."""
