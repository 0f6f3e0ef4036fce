"""Triton kernels and their PyTorch references (causal_trim, rope_hoist, act_calib).

Empty until the kernels issue lands. Nothing here is imported on the static ``check`` path.
"""
