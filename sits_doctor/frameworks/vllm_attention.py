"""Which GPUs each vLLM attention backend runs on, and what vLLM does when the one asked for
cannot run. Read by SITS101.

From vLLM 0.12.0, a backend named with ``--attention-backend`` (or ``attention_config.backend``)
is validated against the device before anything loads, and one that fails raises
``ValueError: Selected backend X is not valid for this configuration. Reason: [...]``
(``vllm/platforms/cuda.py`` ``get_attn_backend_cls``, with ``AttentionBackend.validate_configuration``
adding "compute capability not supported"). The predicates below are each backend's
``supports_compute_capability`` as written in ``vllm/v1/attention/backends/`` at 0.12.0 and at
0.33.0; where the two differ the looser bound is kept, so a finding holds for every release
between them. Backends not listed are not judged.
"""

from __future__ import annotations

from typing import NamedTuple

SELECTED_BACKEND_VALIDATED = "0.12.0"  # first release that raises for an explicitly selected backend
CHECKED_AT = ("0.12.0", "0.13.0", "0.33.0")  # the releases whose backend sources this table was read from
ERROR = ("ValueError: Selected backend {name} is not valid for this configuration. "
         "Reason: ['compute capability not supported']")


class Backend(NamedTuple):
    majors: tuple[int, ...] = ()  # exactly these compute-capability majors (empty: see min_cc)
    min_cc: tuple[int, int] | None = None  # at least this capability
    source: str = ""  # the module under vllm/v1/attention/backends/

    def runs_on(self, cc: tuple[int, int]) -> bool:
        if self.majors and cc[0] not in self.majors:
            return False
        return self.min_cc is None or cc >= self.min_cc

    def needs(self) -> str:
        if self.majors:
            return "compute capability " + " or ".join(f"{m}.x" for m in self.majors)
        return f"compute capability {self.min_cc[0]}.{self.min_cc[1]} or newer"


BACKENDS = {
    "FLASH_ATTN": Backend(min_cc=(8, 0), source="flash_attn.py"),
    # 0.12.0: 7.5 and newer; 0.33.0 raised the floor to 8.0 while FlashInfer is broken on Turing.
    "FLASHINFER": Backend(min_cc=(7, 5), source="flashinfer.py"),
    "FLASHMLA": Backend(majors=(9, 10), source="mla/flashmla.py"),
    "FLASH_ATTN_MLA": Backend(majors=(9,), source="mla/flashattn_mla.py"),
    "CUTLASS_MLA": Backend(majors=(10,), source="mla/cutlass_mla.py"),
    "FLASHINFER_MLA": Backend(majors=(10,), source="mla/flashinfer_mla.py"),
}


def backend(name) -> Backend | None:
    """The table's entry for a backend name as written (the enum member name), or None."""
    return BACKENDS.get(name.strip().upper()) if isinstance(name, str) else None
