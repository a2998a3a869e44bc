"""A model of the bulk-dQ handoff of the Hopper backward (kernels/hopper/flash_bwd.cuh, kDQBulk): the named-barrier
protocol between the 8 consumer warps and the dQ writer warp, run under many random warp schedules. CPU only.

Hardware named barriers are modeled as the PTX ISA describes them: a barrier counts arriving threads (32 per warp);
when the count reaches the expected number (288 here) it completes, releases the warps blocked in bar.sync on it, and
starts over. A warp that arrives twice before completion is counted twice, which is how a protocol bug would show
(an early completion), so the model flags it. Transcribed from the kernel by hand, like model_hopper_bwd.py:

    consumer warp, step s:   if s >= B: bar.sync(EMPTY + s % B); write buffer s % B; bar.arrive(FULL + s % B)
    writer warp, step s:     bar.sync(FULL + s % B); read buffer s % B (reduce, wait_group.read);
                             if s + B < steps: bar.arrive(EMPTY + s % B)

with B = BwdConfig::kDQBuffers: 2, or 1 for the 128-row query blocks (variant m128).

Steps are the CTA's whole walk (BwdQueryWalk: group * query blocks under GQA/MQA, continuing across query heads, and
across the tiles a persistent CTA chains), so the writer's test is the kernel's `step + kDQBuffers < cta_steps` as
written.

Checks, for 1 and 2 buffers, 1..7 steps and 2000 schedules each: every warp finishes (no deadlock), no barrier
completes with a warp counted twice, no barrier is left partly arrived at exit, the writer reads step s's buffer
only after all 8 consumer warps wrote it, and no consumer overwrites a buffer before the writer has read the step
that was in it. Changing the kernel's `s >= B` or `s + B < steps` by one fails it (tried when it was written, with B
= 2).

    python scripts/model_bwd_dq_handoff.py
"""

from __future__ import annotations

import random
import sys

FULL, EMPTY = 10, 12  # NamedBarrier::kFirstId + 2 / + 4 (BwdConfig::kDQFullBarrier, kDQEmptyBarrier)
WARP, CONSUMER_WARPS = 32, 8
EXPECTED = CONSUMER_WARPS * WARP + WARP  # BwdConfig::kDQBarrierThreads = 288


def consumer(steps: int, warp: int, buffers: int = 2):
    for s in range(steps):
        if s >= buffers:
            yield ("sync", EMPTY + s % buffers)
        yield ("write", s, warp)
        yield ("arrive", FULL + s % buffers)


def writer(steps: int, buffers: int = 2):
    for s in range(steps):
        yield ("sync", FULL + s % buffers)
        yield ("read", s)
        if s + buffers < steps:
            yield ("arrive", EMPTY + s % buffers)


def run(steps: int, rng: random.Random, buffers: int = 2) -> str | None:
    """One random schedule; returns what went wrong, or None."""
    warps = {f"c{w}": consumer(steps, w, buffers) for w in range(CONSUMER_WARPS)} | {"writer": writer(steps, buffers)}
    pending = {name: next(gen) for name, gen in warps.items()}
    arrived = {bar + b: [] for bar in (FULL, EMPTY) for b in range(buffers)}  # warps counted in the current generation
    blocked: dict[str, int] = {}  # warp -> barrier it waits on in bar.sync
    buffer_step = dict.fromkeys(range(buffers))  # step whose dQ a buffer holds
    written = {}  # step -> consumer warps that wrote it
    read = set()

    def count(bar, name):
        if name in arrived[bar]:
            return f"warp {name} arrived twice at barrier {bar} in one generation"
        arrived[bar].append(name)
        if len(arrived[bar]) * WARP == EXPECTED:
            for waiter in [w for w, b in blocked.items() if b == bar]:
                del blocked[waiter]
            arrived[bar] = []
        return None

    def advance(name):
        pending[name] = next(warps[name], None)
        if pending[name] is None:
            del pending[name]

    while pending:
        runnable = [w for w in pending if w not in blocked]
        if not runnable:
            return f"deadlock: {sorted(blocked.items())}"
        name = rng.choice(runnable)
        op = pending[name]
        if op[0] == "sync":
            if (why := count(op[1], name)) is not None:
                return why
            if name in arrived[op[1]]:  # the barrier did not complete with this arrival: wait
                blocked[name] = op[1]
        elif op[0] == "arrive":
            if (why := count(op[1], name)) is not None:
                return why
        elif op[0] == "write":
            _, s, warp = op
            held = buffer_step[s % buffers]
            if held is not None and held != s and held not in read:
                return f"consumer warp {warp} overwrote step {held}'s dQ before the writer read it"
            buffer_step[s % buffers] = s
            written.setdefault(s, set()).add(warp)
        elif op[0] == "read":
            s = op[1]
            if written.get(s, set()) != set(range(CONSUMER_WARPS)) or buffer_step[s % buffers] != s:
                return f"writer read step {s} before every consumer warp wrote it"
            read.add(s)
        advance(name)
    if blocked or any(arrived.values()):
        return f"barriers left partly arrived at exit: {arrived}"
    if read != set(range(steps)):
        return f"steps never reduced: {sorted(set(range(steps)) - read)}"
    return None


def main() -> int:
    rng = random.Random(0)
    failures = 0
    for buffers in (2, 1):
        for steps in range(1, 8):
            problems = {why for _ in range(2000) if (why := run(steps, rng, buffers)) is not None}
            failures += bool(problems)
            print(f"{buffers} buffer(s), {steps} steps: " + ("ok" if not problems else
                                                             "FAIL " + "; ".join(sorted(problems))[:300]))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
