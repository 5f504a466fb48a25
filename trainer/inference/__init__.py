"""Running a loaded export: the API every layer uses (loaded_model) and its outputs' checks (finite)."""
