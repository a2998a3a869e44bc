"""fa3nn: FlashAttention-3 for NVIDIA Hopper as a PyTorch drop-in for training."""

from fa3nn.combine import flash_attn_combine
from fa3nn.dispatch import UnsupportedCall
from fa3nn.fp8 import CurrentScaling, DelayedScaling, Format, PerTileScaling, sync_amax
from fa3nn.integrations.hf import patch_hf, unpatch_hf
from fa3nn.integrations.hf_trainer import sync_amax_callback
from fa3nn.interface import explain, flash_attn_func, flash_attn_qkvpacked_func, flash_attn_varlen_func
from fa3nn.kvcache import flash_attn_with_kvcache, get_scheduler_metadata
from fa3nn.module import FlashAttentionV3

__version__ = "0.1.0"

__all__ = [
    "CurrentScaling",
    "DelayedScaling",
    "FlashAttentionV3",
    "Format",
    "PerTileScaling",
    "UnsupportedCall",
    "explain",
    "flash_attn_combine",
    "flash_attn_func",
    "flash_attn_qkvpacked_func",
    "flash_attn_varlen_func",
    "flash_attn_with_kvcache",
    "get_scheduler_metadata",
    "patch_hf",
    "sync_amax",
    "sync_amax_callback",
    "unpatch_hf",
]
