"""Integrations with other libraries. Importing this package imports none of them; each is loaded on first use."""

from fa3nn.integrations.hf import patch_hf, unpatch_hf
from fa3nn.integrations.hf_trainer import sync_amax_callback

__all__ = ["patch_hf", "sync_amax_callback", "unpatch_hf"]
