"""Integrations with other libraries. Importing this package imports none of them; each is loaded on first use."""

from fa3nn.integrations.hf import patch_hf, unpatch_hf

__all__ = ["patch_hf", "unpatch_hf"]
