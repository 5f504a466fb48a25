"""Serving: the exported SavedModel and batch prediction over files."""
