"""What transformers accepts, by version: the one home of its config names that rules judge.

``cache_implementation`` values are read in the released wheels 4.45.2, 4.50.0, 4.53.0, 4.56.0,
5.0.0, 5.10.4 and 5.24.0 (``generation/configuration_utils.py``: ``ALL_CACHE_IMPLEMENTATIONS``
and ``"paged"`` from 5.0; ``validate()`` runs in ``GenerationConfig.__init__``).
"""

from __future__ import annotations

from sits_doctor.versions import V

_CACHE_BASE = {"static", "offloaded_static", "sliding_window", "hybrid", "mamba", "quantized"}
STATIC_CACHE_ALIASES = frozenset(
    {"sliding_window", "hybrid", "hybrid_chunked", "offloaded_hybrid", "offloaded_hybrid_chunked"}
)
CACHE_IMPLEMENTATIONS = (
    ("4.45.2", frozenset(_CACHE_BASE)),
    ("4.50.0", frozenset(_CACHE_BASE | {"offloaded", "dynamic"})),
    ("4.53.0", frozenset(_CACHE_BASE | {"offloaded", "dynamic", "hybrid_chunked", "offloaded_hybrid",
                                         "offloaded_hybrid_chunked"})),
    ("4.56.0", frozenset({"static", "offloaded_static", "dynamic", "dynamic_full", "offloaded", "quantized"}
                         | STATIC_CACHE_ALIASES)),
    ("5.0.0", frozenset({"static", "offloaded_static", "dynamic", "dynamic_full", "offloaded", "quantized",
                         "paged"} | STATIC_CACHE_ALIASES)),
    ("5.10.4", frozenset({"static", "offloaded_static", "dynamic", "dynamic_full", "offloaded", "quantized",
                          "paged"} | STATIC_CACHE_ALIASES)),
    ("5.24.0", frozenset({"static", "offloaded_static", "dynamic", "offloaded", "quantized", "paged"}
                         | STATIC_CACHE_ALIASES)),
)
GENERATION_CACHE_KEY = "generation_config.cache_implementation"


def cache_implementations(version: str) -> frozenset[str] | None:
    """Values accepted at ``version``: sure only when the sampled releases around it agree.

    Between two sampled releases a value counts as accepted if either accepts it (we do not know
    where in between it changed); before the first sampled release nothing is judged.
    """
    ver = V(version)
    below = [(V(v), values) for v, values in CACHE_IMPLEMENTATIONS if V(v) <= ver]
    above = [values for v, values in CACHE_IMPLEMENTATIONS if V(v) > ver]
    if not below:
        return None
    sampled, values = below[-1]
    return values if sampled == ver or not above else values | above[0]
