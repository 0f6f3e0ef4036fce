"""Bundled catalogs (data with sources): GPUs and popular model architectures. Loaded lazily —
nothing here is imported on the static ``check`` path unless a rule needs it."""
