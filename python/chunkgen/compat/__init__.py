"""Drop-in entry points: a model written for mamba_ssm or fla runs on chunkgen by changing
one import (docs/compat.md; README, "Switch with one import").

- chunkgen.compat.mamba (PyTorch): mamba_chunk_scan_combined, selective_scan_fn,
  selective_state_update with mamba_ssm's names, arguments, defaults, shapes and returns.
- chunkgen.compat.fla (PyTorch): chunk_simple_gla, chunk_gated_delta_rule and
  fused_recurrent_gated_delta_rule with fla's.
- chunkgen.compat.jax_mamba (JAX): mamba_chunk_scan_combined on jax.Array.
- chunkgen.compat.jax_fla (JAX): chunk_gated_delta_rule and fused_recurrent_gated_delta_rule
  on jax.Array.

Each module is imported on its own (this package imports neither torch nor jax).
"""
