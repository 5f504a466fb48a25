"""The run report: figures, worst errors, calibration and a model card for a finished job dir,
for every task (classification, regression, multi-label; single texts or pairs).

calibration.py (temperature scaling, ECE, Brier), predictions.py (a finished run's validation and
test predictions from its exported model), figures.py, errors.py, model_card.py, html.py, and
build.py, which writes them all.
"""
