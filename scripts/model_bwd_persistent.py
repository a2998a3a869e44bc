"""A model of the persistent Hopper backward's shared-memory protocol across tile ends (kernels/hopper/flash_bwd.cuh:
BwdCtaTiles, bwd_producer, bwd_load_kv, bwd_wait_kv / bwd_free_kv, both consumers), run under many random schedules.
CPU only.

Each CTA walks several (key block, K/V head, batch) tiles with one K/V buffer and a kStages ring for Q / dO / lse /
delta that runs on across tiles. mbarriers are modeled as the PTX ISA describes them: a phase completes when its
pending arrivals and its transaction bytes both reach zero, then the parity flips and the arrival count restarts;
try_wait.parity(p) succeeds once the phase of parity p has completed (the current parity differs from p). TMA
copies are issued by the producer and land (write their buffer, complete their bytes) at a random later time.
Transcribed from the kernel by hand:

    producer, tile t (iter t): if t > 0: wait kv_free parity (t - 1) & 1
                               kv.arrive_expect_tx; TMA K/V of tile t
                               per step: wait empty[i] parity phase ^ 1; full[i].arrive_expect_tx; TMA stage
    consumer, tile t:          wait kv parity t & 1
                               per step i: wait full[i] parity phase; S^T, dP^T (read K, V and the stage);
                                 dK/dV GEMMs (stage); [default: dQ (reads K)]; release empty[i];
                                 [default, last step: kv_free.arrive]
                                 [fa3 (d128's bulk dQ): dV (stage), dQ (reads K), last step: kv_free.arrive,
                                  then dK (stage); release empty[i]]
                               [overlap: the tile's last dQ (reads K); kv_free.arrive]

Checks, for 2 and 3 stages, the three consumer orders, 1-5 tiles of 1-4 steps and 3000 schedules each: no deadlock;
every read of K/V sees the consumer's current tile and every read of a stage sees its (tile, step); no TMA write lands
in a K/V buffer or stage that a consumer may still read (checked when the copy is issued, since a real one may start
writing at once); no barrier is left with a phase partly arrived at exit. Moving the default or fa3 consumer's kv_free
arrive before its last dQ, or the overlap consumer's before the final dQ, fails it (in every order); so does a producer
that skips the kv_free wait or waits on the wrong parity.

    python scripts/model_bwd_persistent.py
"""

from __future__ import annotations

import random
import sys


class MBarrier:
    def __init__(self, arrivals: int):
        self.expected, self.pending, self.tx, self.parity = arrivals, arrivals, 0, 0

    def _maybe_complete(self):
        if self.pending == 0 and self.tx == 0:
            self.parity ^= 1
            self.pending = self.expected

    def arrive(self, expect_tx: int = 0):
        self.tx += expect_tx
        self.pending -= 1
        self._maybe_complete()

    def complete_tx(self, nbytes: int):
        self.tx -= nbytes
        self._maybe_complete()

    def done(self, parity: int) -> bool:  # try_wait.parity
        return self.parity != parity


def producer(tiles, stages, bars, mutate=None):
    index, phase = 0, 0
    for t, steps in enumerate(tiles):
        if t > 0 and mutate != "skip_kv_free_wait":
            parity = (t - 1) & 1 if mutate != "kv_free_parity" else t & 1
            yield ("wait", bars["kv_free"], parity)
        bars["kv"].arrive(expect_tx=1)
        yield ("tma", "kv", t, bars["kv"])
        for i in range(steps):
            yield ("wait", bars["empty"][index], phase ^ 1)
            bars["full"][index].arrive(expect_tx=1)
            yield ("tma", ("stage", index), (t, i), bars["full"][index])
            index += 1
            if index == stages:
                index, phase = 0, phase ^ 1


def consumer(wg, tiles, stages, bars, order, state, mutate=None):
    overlap = order == "overlap"
    index, phase = 0, 0
    for t, steps in enumerate(tiles):
        yield ("wait", bars["kv"], t & 1)
        state["kv_window"][wg] = t
        if overlap:
            yield ("read", "kv", t)  # the tile's discarded dQ_-1 reads K
        for i in range(steps):
            yield ("wait", bars["full"][index], phase)
            state["holds"][wg].add(index)
            yield ("read", "kv", t)
            yield ("read", ("stage", index), (t, i))
            last = i + 1 == steps
            if order == "fa3":  # dV (dO), dQ (K), kv_free on the last step, then dK (Q) before the release
                yield ("read", ("stage", index), (t, i))
                if last and mutate == "early_kv_free":
                    yield ("arrive", bars["kv_free"], wg)
                yield ("read", "kv", t)
                if last and mutate != "early_kv_free":
                    state["kv_window"][wg] = None
                    yield ("arrive", bars["kv_free"], wg)
                yield ("read", ("stage", index), (t, i))
                state["holds"][wg].discard(index)
                yield ("arrive", bars["empty"][index], wg)
                index += 1
                if index == stages:
                    index, phase = 0, phase ^ 1
                continue
            yield ("read", ("stage", index), (t, i))  # the dK / dV GEMMs read Q and dO again
            if not overlap:
                if last and mutate == "early_kv_free":
                    yield ("arrive", bars["kv_free"], wg)
                yield ("read", "kv", t)  # this step's dQ GEMM reads K
            state["holds"][wg].discard(index)
            yield ("arrive", bars["empty"][index], wg)
            if not overlap and last and mutate != "early_kv_free":
                state["kv_window"][wg] = None
                yield ("arrive", bars["kv_free"], wg)
            index += 1
            if index == stages:
                index, phase = 0, phase ^ 1
        if overlap:
            if mutate == "early_kv_free":
                yield ("arrive", bars["kv_free"], wg)
            yield ("read", "kv", t)  # the tile's last dQ
            if mutate != "early_kv_free":
                state["kv_window"][wg] = None
                yield ("arrive", bars["kv_free"], wg)
        state["kv_window"][wg] = None


def run(tiles, stages, order, rng, mutate=None) -> str | None:
    bars = {"kv": MBarrier(1), "kv_free": MBarrier(2), "full": [MBarrier(1) for _ in range(stages)],
            "empty": [MBarrier(2) for _ in range(stages)]}
    state = {"kv_window": [None, None], "holds": [set(), set()]}
    memory = {}  # buffer -> what landed there
    in_flight = []  # (buffer, value, barrier)
    actors = {"producer": producer(tiles, stages, bars, mutate)}
    actors |= {f"c{wg}": consumer(wg, tiles, stages, bars, order, state, mutate) for wg in range(2)}
    pending = {name: next(gen) for name, gen in actors.items()}
    while pending or in_flight:
        ready = [n for n, op in pending.items() if op[0] != "wait" or op[1].done(op[2])]
        choices = ready + (["tma"] if in_flight else [])
        if not choices:
            return "deadlock: " + ", ".join(f"{n} waits parity {op[2]}" for n, op in pending.items())
        name = rng.choice(choices)
        if name == "tma":
            buffer, value, bar = in_flight.pop(rng.randrange(len(in_flight)))
            memory[buffer] = value
            bar.complete_tx(1)
            continue
        op = pending[name]
        if op[0] == "tma":
            _, buffer, value, bar = op
            if buffer == "kv":
                readers = [w for w in (0, 1) if state["kv_window"][w] is not None and state["kv_window"][w] < value]
                if readers:
                    return f"K/V of tile {value} issued while consumer {readers} may still read tile {value - 1}'s"
            elif any(buffer[1] in h for h in state["holds"]):
                return f"stage {buffer[1]} reloaded while a consumer holds it"
            in_flight.append((buffer, value, bar))
        elif op[0] == "read":
            _, buffer, want = op
            if memory.get(buffer) != want:
                return f"{name} read {buffer} = {memory.get(buffer)}, expected {want}"
        elif op[0] == "arrive":
            op[1].arrive()
        pending[name] = next(actors[name], None)
        if pending[name] is None:
            del pending[name]
    every = [bars["kv"], bars["kv_free"], *bars["full"], *bars["empty"]]
    if any(b.pending != b.expected or b.tx for b in every):
        return "a barrier left partly arrived at exit"
    return None


ORDERS = ("default", "overlap", "fa3")  # the consumers: bwd_consumer's two orders, bwd_consumer_overlap


def check(mutate=None, schedules: int = 3000) -> list[str]:
    rng = random.Random(0)
    problems = []
    for stages in (2, 3):
        for order in ORDERS:
            for _ in range(schedules):
                tiles = [rng.randint(1, 4) for _ in range(rng.randint(1, 5))]
                if (why := run(tiles, stages, order, rng, mutate)) is not None:
                    problems.append(f"stages {stages} order {order} tiles {tiles}: {why}")
                    break
    return problems


def main() -> int:
    problems = check()
    print("persistent protocol: " + ("ok" if not problems else "FAIL\n  " + "\n  ".join(problems)))
    for mutate in ("early_kv_free", "skip_kv_free_wait", "kv_free_parity"):
        caught = check(mutate, schedules=500)
        print(f"mutation {mutate}: " + ("caught" if caught else "NOT caught"))
        if not caught:
            problems.append(mutate)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
