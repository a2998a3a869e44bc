"""fa3nn's test kit, installed with the package so users can test their own kernels the way fa3nn tests its own."""

from fa3nn.testing.data import pad, random_padding_mask, random_qkv, unpad
from fa3nn.testing.error_ratio import assert_error_ratio, error_ratio_report, rounding_noise
from fa3nn.testing.reference import attention_ref

__all__ = [
    "assert_error_ratio",
    "attention_ref",
    "error_ratio_report",
    "pad",
    "random_padding_mask",
    "random_qkv",
    "rounding_noise",
    "unpad",
]
