"""Token attributions: integrated gradients on the word embeddings of an exported model,
merged from word pieces back to words (trainer.explain, report.html, trainer.serve)."""
