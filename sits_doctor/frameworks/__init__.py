"""Framework knowledge: what each framework accepts, by version (one module per framework)."""
