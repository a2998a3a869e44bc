"""CPU checks of the native Hopper build: every kernel instantiation compiles for sm_90a with no register spills,
no local memory and no ptxas wgmma-serialization/setmaxnreg warnings (scripts/check_kernels.py), and the build cache
key follows the sources. Needs nvcc (no GPU); skipped without it. The first run compiles (~1.5 min on 2 cores),
later runs reuse the cached library and its ptxas log."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from script_module import load_script

from fa3nn.backends import hopper_build

ROOT = Path(__file__).resolve().parents[1]
needs_nvcc = pytest.mark.skipif(hopper_build.find_nvcc() is None, reason="needs nvcc (CUDA toolkit)")


class _FakeLibrary:
    """A stand-in for a loaded library: has fa3nn_hopper_abi_version (returning `version`) unless version is None."""

    def __init__(self, version):
        if version is not None:
            self.fa3nn_hopper_abi_version = lambda: version


def test_check_abi_refuses_a_library_of_another_revision():
    """hopper_build.load checks the library's C ABI version first (check_abi): a prebuilt library from another
    revision, or one from before the version existed, fails with a message naming the fix instead of being called
    with arguments it reads elsewhere."""
    hopper_build.check_abi(_FakeLibrary(hopper_build.ABI_VERSION), "lib.so")  # the matching version loads
    for version, shown in ((None, r"\(none: built before 2026-12-04\)"), (hopper_build.ABI_VERSION + 1, None)):
        shown = shown or str(hopper_build.ABI_VERSION + 1)
        with pytest.raises(RuntimeError, match=rf"lib.so has C ABI version {shown}, this fa3nn binds version "
                                               rf"{hopper_build.ABI_VERSION}: rebuild it"):
            hopper_build.check_abi(_FakeLibrary(version), "lib.so")


def test_ptxas_report_parser_flags_spills():
    check = load_script("check_kernels")
    name = "_ZN5fa3nn6hopper16flash_fwd_kernelINS0_9FwdConfigILi128ELi176ELi2ELb1ELb0ELb1ELb1ELi2ELb0ELi1ELb1EEEEEv"
    log = (
        f"ptxas info    : Compiling entry function '{name}' for 'sm_90a'\n"
        f"ptxas info    : Function properties for {name}\n"
        "    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads\n"
        "ptxas info    : Used 168 registers, used 16 barriers\n"
    )
    kernels, warnings = check.parse(log)
    assert len(kernels) == 1 and not warnings
    k = kernels[0]
    assert (k.registers, k.stack, k.spill_stores, k.spill_loads) == (168, 8, 4, 4)
    assert k.config["headdim"] == 128 and k.config["block_n"] == 176 and k.config["consumers"] == 2
    assert "128x176" in k.describe()


@needs_nvcc
def test_cache_key_follows_sources(tmp_path):
    for path in hopper_build.source_files(hopper_build.kernels_dir()):
        shutil.copy(path, tmp_path / path.name)
    nvcc = hopper_build.find_nvcc()
    key = hopper_build.cache_key(tmp_path, nvcc)
    assert key == hopper_build.cache_key(tmp_path, nvcc)
    (tmp_path / "softmax.cuh").write_text((tmp_path / "softmax.cuh").read_text() + "\n// edited\n")
    assert hopper_build.cache_key(tmp_path, nvcc) != key


@needs_nvcc
def test_every_instantiation_compiles_without_spills(capsys):
    status = load_script("check_kernels").main([])
    report = capsys.readouterr().out
    assert status == 0, report
    assert "0 spills" in report


def test_fp8_instantiations_are_described_and_need_qgmma_and_tma_in_sass():
    check = load_script("check_kernels")
    name = ("_ZN5fa3nn6hopper20flash_fwd_fp8_kernelINS0_12Fp8FwdConfigILi128ELi3ELi2ELb1ELb0ELb1ELi4EEEEEv"
            "14CUtensorMap_stS4_S4_NS0_12Fp8FwdParamsE")
    log = (
        f"ptxas info    : Compiling entry function '{name}' for 'sm_90a'\n"
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 168 registers, used 16 barriers\n"
    )
    (k,), warnings = check.parse(log)
    assert k.fp8 and "d128 fp8>bf16 full   128x128  st3 q2 POE4" in k.describe()
    assert k.sass_failure is None and "SASS not checked" in k.sass_summary()  # no cuobjdump: nothing claimed
    k.sass = {"HGMMA": 16, "UTMALDG": 3}  # bf16 tensor-core instructions are not FP8 ones
    assert k.sass_failure == "no QGMMA in SASS"
    k.sass = {"QGMMA": 16}
    assert k.sass_failure == "no UTMALDG in SASS"
    k.sass = {"QGMMA": 16, "UTMALDG": 3}
    assert k.sass_failure is None and k.sass_summary() == "QGMMA 16 UTMALDG 3"


@pytest.mark.parametrize("overlap", [False, True])
@pytest.mark.parametrize("dq_bulk", [False, True])
def test_bwd_instantiations_need_their_dq_instruction_in_sass(dq_bulk, overlap):
    """The backward's default kernel must reduce dQ with REDG; the bulk-dQ variant with UTMAREDG and no REDG; the
    overlap variants likewise, flagged in the table."""
    check = load_script("check_kernels")
    name = (f"_ZN5fa3nn6hopper16flash_bwd_kernelINS0_9BwdConfigILi128ELi2ELb1ELb0ELb{int(dq_bulk)}ELb{int(overlap)}"
            "EEEEEv14CUtensorMap_stS4_S4_S4_S4_NS0_9BwdParamsE")
    log = (
        f"ptxas info    : Compiling entry function '{name}' for 'sm_90a'\n"
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 168 registers, used 16 barriers\n"
    )
    (k,), _ = check.parse(log)
    assert k.bwd and k.bwd_dq_bulk == dq_bulk
    assert f"dQ {'bulk' if dq_bulk else 'red'} by cols" in k.describe()
    assert ("ovl S " in k.describe()) == overlap
    assert f"smem {226.0 if dq_bulk else 162.0} KB" in k.describe()
    base = {"HGMMA": 32, "UTMALDG": 8, "UBLKCP": 2}
    k.sass = base | {"REDG": 16}
    assert k.sass_failure == ("no UTMAREDG in SASS" if dq_bulk else None)
    k.sass = base | {"UTMAREDG": 20}
    assert k.sass_failure == (None if dq_bulk else "no REDG in SASS")
    k.sass = base | {"UTMAREDG": 20, "REDG": 16}
    assert k.sass_failure == ("bulk dQ variant still has 16 REDG" if dq_bulk else None)


def _parsed(check, name):
    log = (
        f"ptxas info    : Compiling entry function '{name}' for 'sm_90a'\n"
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 168 registers, used 16 barriers\n"
    )
    (k,), _ = check.parse(log)
    return k


def test_newer_instantiations_are_read_as_what_they_are():
    """Names check_kernels misread before 2026-12-04: an FP8 kernel with a negative template int (mangled n<digits>:
    the linear-exp2 variants) is an FP8 kernel (it was checked for HGMMA), the 16-byte pre/post kernels are
    elementwise, and the backward's 128-row / varlen / window / softcap arguments show in its row."""
    check = load_script("check_kernels")
    fp8 = _parsed(check, "_ZN5fa3nn6hopper20flash_fwd_fp8_kernelINS0_12Fp8FwdConfigILi128ELi2ELi2ELb1ELb0ELb1ELin2E"
                         "Li15ELi256ELb1ELi2EEEEEv14CUtensorMap_stS4_S4_NS0_12Fp8FwdParamsE")
    assert fp8.fp8 and "d128 fp8>bf16 full   128x256  st2 q2 PSE-2X15" in fp8.describe()
    fp8.sass = {"QGMMA": 32, "UTMALDG": 4}
    assert fp8.sass_failure is None
    post = _parsed(check, "_ZN5fa3nn6hopper32flash_bwd_postprocess_vec_kernelILi64ELb1EEEvNS0_17BwdPrePostParamsE")
    post.sass = {}
    assert post.elementwise and post.sass_failure is None
    bwd = _parsed(check, "_ZN5fa3nn6hopper16flash_bwd_kernelINS0_9BwdConfigILi64ELi2ELb1ELb0ELb1ELb0ELi128ELb1ELb1"
                         "ELb1EEEEEv14CUtensorMap_stS4_S4_S4_S4_NS0_9BwdParamsE")
    assert bwd.bwd and bwd.bwd_dq_bulk
    assert "bwd d64  bf16 full   128x128  st2 dQ bulk by rows VLC regs 168 (setmaxnreg 32/232)  smem 195.0 KB" in (
        bwd.describe())
    # Multi-head latent attention (192 / 128): V's head dim is read, and shared memory counted with it (the kernels'
    # static_asserts hold the real layouts to 227 KB: 128 x 96 forward 216 KB + barriers, backward 201 KB + 1.1).
    mla_bwd = _parsed(check, "_ZN5fa3nn6hopper16flash_bwd_kernelINS0_9BwdConfigILi192ELi2ELb0ELb0ELb1ELb0ELi64ELb0"
                             "ELb0ELb0ELi128EEEEEv14CUtensorMap_stS4_S4_S4_S4_NS0_9BwdParamsE")
    assert "bwd d192/128 fp16 full   64x64   st2 dQ bulk by panels     regs 168 (setmaxnreg 24/240)  smem 202.0 KB" in (
        mla_bwd.describe())
    mla_fwd = _parsed(check, "_ZN5fa3nn6hopper16flash_fwd_kernelINS0_9FwdConfigILi192ELi96ELi2ELb1ELb0ELb1ELb1ELi2"
                             "ELb0ELi2ELb1ELb1ELb0ELb0ELi128EEEEEv14CUtensorMap_stS4_S4_S4_NS0_9FwdParamsE")
    assert "d192/128 bf16 full   128x96   st2 q2 POT  regs 168 (setmaxnreg 24/240)  smem 217.1 KB" in mla_fwd.describe()


def test_measurement_defines_need_an_out_path(capsys):
    """`--define` (a measurement build such as FA3NN_BWD_TRACE) never writes the cached default library: without
    --out the CLI refuses before compiling anything."""
    with pytest.raises(SystemExit) as exit_info:
        hopper_build.main(["--define", "FA3NN_BWD_TRACE"])
    assert exit_info.value.code == 2
    assert "--define builds a measurement library: give it --out" in capsys.readouterr().err
