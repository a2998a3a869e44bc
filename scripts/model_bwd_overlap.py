"""A schedule model of the overlap variants of the Hopper backward (kernels/hopper/flash_bwd_overlap.cuh): the two
consumer warpgroups' program order, their asynchronous wgmma groups, the Q/dO/lse/delta ring and the dS^T buffers,
run under many random schedules. CPU only.

Actors: each consumer warpgroup runs its program (transcribed from bwd_consumer_overlap by hand, below); each
warpgroup's tensor core completes its oldest committed wgmma group whenever the scheduler picks it (groups complete
in order, PTX ISA wgmma.wait_group: "wait until N or fewer of the most recent groups are pending"); the producer
fills ring stage m % stages with query block m once both consumers released block m - stages. Step 0 issues a dQ
GEMM of the not yet written dS^T buffer 1 whose result is discarded (the kernel's reason is in its comment); it still
counts as a reader of that buffer. Checked on every schedule:

- an accumulator is read (mask/P^T, dS^T, the dQ hand-off) only after the group that wrote it completed, and a GEMM
  does not overwrite an accumulator whose last value was not read yet;
- the A fragments (P^T, dS^T) are repacked only after the dV/dK GEMMs reading them completed;
- a GEMM that reads a ring stage (S^T, dP^T: Q, dO; dK, dV: Q, dO) is issued while the stage holds its query block,
  and the producer never refills a stage that a pending GEMM still reads; lse/delta reads find their block;
- dQ_j is issued only when the dS^T rows it sums over (d128: both warpgroups', the column split; d64: its own) hold
  step j, and no dS^T row is overwritten while a pending dQ GEMM reads it;
- no deadlock.

Changing the program fails it: dropping step 0's dQ group (d64: the waits then count one group short, so the
first step reads dP^T before it completed; d128's waits happen to tolerate it), releasing the stage before the
dK/dV wait (the producer refills Q/dO under the dK/dV GEMMs), or dropping the d128 dS barrier (dQ_j reads the other
warpgroup's dS^T rows before they are written). tests/test_hopper_bwd.py runs all three.

    python scripts/model_bwd_overlap.py
"""

from __future__ import annotations

import random
import sys

STAGES = {64: 3, 128: 2}  # BwdTiles<D>::kStages


def consumer_program(wg: int, steps: int, headdim: int, dq_group_at_step0: bool = True,
                     release_before_wait: bool = False, ds_barrier: bool = True):
    """bwd_consumer_overlap's order of waits, issues, commits and shared-memory writes (kOverlapDP = d64)."""
    ahead_dp = headdim < 128
    for j in range(steps):
        if ahead_dp:
            yield ("wait_full", j)
            yield ("issue", "S", j)
            yield ("commit",)
            yield ("issue", "dP", j)
            yield ("commit",)
        if j > 0 or dq_group_at_step0:
            yield ("issue", "dQ", j - 1)  # at j = 0 a dQ of the unwritten buffer, never handed off
            yield ("commit",)
        if not ahead_dp:  # d128: dQ_j-1 first, the stage wait and S^T_j under it
            yield ("wait_full", j)
            yield ("issue", "S", j)
            yield ("commit",)
        if ahead_dp:
            yield ("wait", 2)
            yield ("use", "S", j)  # mask, P^T (reads lse of stage j)
            yield ("wait", 1)
            yield ("use", "dP", j)  # dS^T (reads delta)
            yield ("pack", j)
            yield ("wait", 0)
            if j > 0:
                yield ("use", "dQ", j - 1)  # hand-off
            yield ("write_ds", j)
        else:
            yield ("wait", 1)
            if j > 0:
                yield ("use", "dQ", j - 1)  # hand-off while S^T_j runs
            yield ("wait", 0)
            yield ("issue", "dP", j)
            yield ("commit",)
            yield ("use", "S", j)
            yield ("wait", 0)
            yield ("use", "dP", j)
            yield ("pack", j)
            yield ("write_ds", j)
        yield ("issue", "dV", j)
        yield ("issue", "dK", j)
        yield ("commit",)
        if release_before_wait:
            yield ("release", j)
        if ds_barrier:
            yield ("barrier", j)
        yield ("wait", 0)
        if not release_before_wait:
            yield ("release", j)
    yield ("issue", "dQ", steps - 1)
    yield ("commit",)
    yield ("wait", 0)
    yield ("use", "dQ", steps - 1)


def run(steps: int, headdim: int, rng: random.Random, program=None) -> str | None:
    """One random schedule; returns what went wrong, or None."""
    program = program or consumer_program
    stages = STAGES[headdim]
    both_rows = headdim >= 128  # dQ split by columns: each dQ GEMM sums over both warpgroups' keys
    progs = {wg: program(wg, steps, headdim) for wg in (0, 1)}
    op = {wg: next(progs[wg], None) for wg in (0, 1)}
    stage_block = [None] * stages  # query block a ring stage holds
    released = {}  # block -> warpgroups that released its stage
    next_fill = 0
    open_group = {0: [], 1: []}  # wgmmas issued since the last commit
    pending = {0: [], 1: []}  # committed groups, oldest first: lists of (name, step)
    acc = {wg: {} for wg in (0, 1)}  # accumulator -> (step, state) state in issued / done / read
    frag_readers = {0: None, 1: None}  # step whose dV/dK GEMMs read the A fragments, while pending
    ds_rows = {(b, wg): None for b in (0, 1) for wg in (0, 1)}  # step of the dS^T rows in buffer b from warpgroup wg
    barrier_arrived: dict[int, set] = {}

    def stage_reads(name):
        return name in ("S", "dP", "dV", "dK")

    def in_flight():
        for wg in (0, 1):
            for group in pending[wg] + [open_group[wg]]:
                yield from ((wg, name, step) for name, step in group)

    def issue(wg, name, step):
        if stage_reads(name) and stage_block[step % stages] != step:
            return f"wg{wg} issued {name}_{step} while its stage holds block {stage_block[step % stages]}"
        if name == "dQ" and step < 0:
            open_group[wg].append((name, step))  # step 0's dQ: reads buffer 1, its result is discarded
            return None
        if name == "dQ":
            for src in ((0, 1) if both_rows else (wg,)):
                if ds_rows[(step % 2, src)] != step:
                    return f"wg{wg} issued dQ_{step} before wg{src} wrote its dS^T rows of step {step}"
        if name in ("S", "dP", "dQ"):
            prev = acc[wg].get(name)
            if prev is not None and prev[1] != "read":
                return f"wg{wg} issued {name}_{step} over {name}_{prev[0]}, which was not read yet"
            acc[wg][name] = (step, "issued")
        if name in ("dV", "dK"):
            frag_readers[wg] = step
        open_group[wg].append((name, step))
        return None

    def complete(wg):
        for name, step in pending[wg].pop(0):
            if name in acc[wg] and acc[wg][name] == (step, "issued"):
                acc[wg][name] = (step, "done")
            if name in ("dV", "dK") and frag_readers[wg] == step:
                if not any(n in ("dV", "dK") for g in pending[wg] for n, _ in g):
                    frag_readers[wg] = None

    def execute(wg, o) -> tuple[bool, str | None]:
        """Runs op o of warpgroup wg; returns (advanced, error)."""
        kind = o[0]
        if kind == "wait_full":
            return stage_block[o[1] % stages] == o[1], None
        if kind == "wait":
            return len(pending[wg]) <= o[1], None
        if kind == "commit":
            pending[wg].append(open_group[wg])
            open_group[wg] = []
            return True, None
        if kind == "issue":
            return True, issue(wg, o[1], o[2])
        if kind == "use":
            name, step = o[1], o[2]
            if acc[wg].get(name) != (step, "done"):
                return True, f"wg{wg} read {name}_{step} in state {acc[wg].get(name)} (its wgmma not complete)"
            if name in ("S", "dP") and stage_block[step % stages] != step:
                return True, f"wg{wg} read lse/delta of block {step} after its stage was refilled"
            acc[wg][name] = (step, "read")
            return True, None
        if kind == "pack":
            if frag_readers[wg] is not None:
                return True, f"wg{wg} repacked P^T/dS^T of step {o[1]} under dV/dK_{frag_readers[wg]}"
            return True, None
        if kind == "write_ds":
            buffer = o[1] % 2
            for other, name, step in in_flight():
                if name == "dQ" and step % 2 == buffer and (both_rows or other == wg):
                    return True, f"wg{wg} overwrote dS^T buffer {buffer} while wg{other}'s dQ_{step} reads it"
            ds_rows[(buffer, wg)] = o[1]
            return True, None
        if kind == "barrier":
            if not both_rows:
                return True, None  # d64: a barrier of the warpgroup's own 128 threads
            arrived = barrier_arrived.setdefault(o[1], set())
            arrived.add(wg)
            return len(arrived) == 2, None
        if kind == "release":
            released.setdefault(o[1], set()).add(wg)
            return True, None
        raise ValueError(f"unknown op {o}")

    while True:
        choices = [("wg", wg) for wg in (0, 1) if op[wg] is not None]
        choices += [("tc", wg) for wg in (0, 1) if pending[wg]]
        fill_ready = next_fill < steps and (next_fill < stages or released.get(next_fill - stages) == {0, 1})
        if fill_ready:
            choices.append(("producer", None))
        if not choices:
            return None
        progress = False
        for actor, wg in rng.sample(choices, len(choices)):
            if actor == "tc":
                complete(wg)
            elif actor == "producer":
                stage = next_fill % stages
                for other, name, step in in_flight():
                    if stage_reads(name) and step == stage_block[stage]:
                        return f"producer refilled stage {stage} under wg{other}'s {name}_{step}"
                stage_block[stage] = next_fill
                next_fill += 1
            else:
                advanced, error = execute(wg, op[wg])
                if error:
                    return error
                if not advanced:
                    continue
                op[wg] = next(progs[wg], None)
            progress = True
            break
        if not progress:
            return f"deadlock: warpgroups at {op}, pending groups {pending}"


def main() -> int:
    failures = 0
    for headdim in (64, 128):
        for steps in range(1, 8):
            rng = random.Random(1000 * headdim + steps)
            for _ in range(400):
                if (why := run(steps, headdim, rng)) is not None:
                    print(f"d{headdim} {steps} query blocks: {why}")
                    failures += 1
                    break
    print("overlap schedule model:", "FAILED" if failures else "ok (d64/d128, 1-7 query blocks, 400 schedules each)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
