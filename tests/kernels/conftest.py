import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # kernels run on the CPU through Triton's interpreter
