"""A model of the 2-CTA cluster backward's protocol (kernels/hopper/flash_bwd_mla.cuh "Clusters", BwdConfig::kCluster):
two CTAs of a pair, each with a producer, two consumer warpgroups and a dQ writer, sharing every ring stage's Q / dO
(TMA multicast) and exchanging half of each step's dQ (st.async into the partner's receive buffer), run under many
random schedules. CPU only.

mbarriers as in model_bwd_persistent.py (a phase completes when its arrivals and transaction bytes reach zero;
try_wait.parity(p) succeeds once the phase of parity p has completed); named barriers as in model_bwd_dq_handoff.py
(bar.sync = arrive and wait for the generation to complete, bar.arrive = count only; here one participant per
warpgroup and one for the writer warp). Copies and st.async stores land at a random later time. Transcribed from the
kernel by hand (r = rank, p = 1 - r, s = step, i / ph = ring index / phase):

    producer r:   per step: wait empty_r[i] parity ph ^ 1; full_r[i].arrive_expect_tx(Q + dO + stats)
                            r = 0: Q multicast into stage i of both CTAs (bytes on both full[i]); r = 1: dO
                            stats into its own stage i
    consumer r w: per step: wait full_r[i] parity ph; read Q, dO, stats (GEMMs); bar.sync(dS, both warpgroups);
                            release empty_r[i] and empty_p[i]
                            if s >= 1 and role w holds a panel rank p reduces: wait peer_free_r parity (s - 1) & 1
                            send those panels into recv_p (bytes on recv_full_p)
                            if role w holds a panel rank r reduces: wait recv_full_r parity s & 1, read them from
                            recv_r (what rank p's role w sent)
                            if s >= 1: bar.sync(EMPTY); write staging_r; bar.arrive(FULL)
    writer r:     before the loop (steps > 0): recv_full_r.arrive_expect_tx(3 panels)
                  per step: bar.sync(FULL); if s + 1 < steps: recv_full_r.arrive_expect_tx(3), arrive peer_free_p
                            read staging_r (reduce-adds, wait read); if s + 1 < steps: bar.arrive(EMPTY)

Checks, for 1-6 steps and 2 or 3 stages, 2000 schedules each: no deadlock; every read of a stage, a receive buffer
or a staging tile sees the step it expects; no multicast is issued while a consumer of either CTA still reads that
stage, and no send while the partner's consumers may still read the previous step's receive buffer; no mbarrier is
left partly arrived at exit. The mutations below must each fail it; "non_sender_waits" is the first version of the
kernel (role 0 of rank 0, which sends nothing, waited for peer_free too and could fall two phases behind), which a
review found and an earlier version of this model, without the roles' panels, missed.

    python scripts/model_bwd_cluster.py
"""

from __future__ import annotations

import random
import sys

MUTATIONS = ("no_peer_free_wait", "non_sender_waits", "local_release_only", "recv_expect_once", "recv_parity",
             "writer_frees_early")
# dQ's fp32 panels (32 columns each) held by each consumer role (flash_bwd_mla.cuh MlaPanels: role 0 dQ panel 0,
# role 1 panels 1-2, two fp32 panels per 64-column panel); rank r reduces panels [3r, 3r + 3).
ROLE_PANELS = ((0, 1), (2, 3, 4, 5))
OWNED = 3


def owner(panel: int) -> int:
    return panel // OWNED


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

    def done(self, parity: int) -> bool:
        return self.parity != parity


class NamedBarrier:
    def __init__(self, participants: int):
        self.participants, self.count, self.generation = participants, 0, 0

    def arrive(self) -> int:  # the generation this arrival belongs to
        generation = self.generation
        self.count += 1
        if self.count == self.participants:
            self.count, self.generation = 0, self.generation + 1
        return generation


def producer(r, steps, stages, bars):
    index, phase = 0, 0
    for s in range(steps):
        yield ("wait", bars[r]["empty"][index], phase ^ 1)
        bars[r]["full"][index].arrive(expect_tx=3)  # Q, dO, stats
        part = "q" if r == 0 else "do"
        yield ("multicast", index, part, s)
        yield ("copy", r, ("stage", index, "stats"), s, bars[r]["full"][index])
        index += 1
        if index == stages:
            index, phase = 0, phase ^ 1


def consumer(r, w, steps, stages, bars, state, mutate):
    p = 1 - r
    sent = [panel for panel in ROLE_PANELS[w] if owner(panel) == p]
    kept = [panel for panel in ROLE_PANELS[w] if owner(panel) == r]
    index, phase = 0, 0
    for s in range(steps):
        yield ("wait", bars[r]["full"][index], phase)
        state["holds"][r][w].add(index)
        for part in ("q", "do", "stats"):
            yield ("read", r, ("stage", index, part), s)
        yield ("sync", ("ds", r))  # the P^T / dS^T barrier of both warpgroups (bwd_cols_probs)
        state["holds"][r][w].discard(index)
        yield ("arrive", bars[r]["empty"][index])
        if mutate != "local_release_only":
            yield ("arrive", bars[p]["empty"][index])
        index += 1
        if index == stages:
            index, phase = 0, phase ^ 1
        if s >= 1 and mutate != "no_peer_free_wait" and (sent or mutate == "non_sender_waits"):
            yield ("wait", bars[r]["peer_free"], (s - 1) & 1)
        for panel in sent:
            yield ("send", p, panel, s)
        if kept:
            parity = s & 1 if mutate != "recv_parity" else (s & 1) ^ (s >= 2)
            yield ("wait", bars[r]["recv_full"], parity)
        for panel in kept:
            yield ("read", r, ("recv", panel % OWNED), s)
            state["recv_pending"][r][panel % OWNED] = s + 1  # step s's value of this panel has been read
        if s >= 1:
            yield ("sync", ("empty", r))
        yield ("write", r, ("staging", w), s)
        yield ("bar_arrive", ("full", r))


def writer(r, steps, bars, mutate):
    p = 1 - r
    if steps > 0:
        bars[r]["recv_full"].arrive(expect_tx=OWNED)
    for s in range(steps):
        yield ("sync", ("full", r))
        if s + 1 < steps:
            if mutate != "recv_expect_once":
                bars[r]["recv_full"].arrive(expect_tx=OWNED)
            yield ("arrive", bars[p]["peer_free"])
        if mutate == "writer_frees_early" and s + 1 < steps:
            yield ("bar_arrive", ("empty", r))
        for w in (0, 1):
            yield ("read", r, ("staging", w), s)
        if mutate != "writer_frees_early" and s + 1 < steps:
            yield ("bar_arrive", ("empty", r))


def run(steps, stages, rng, mutate=None) -> str | None:
    bars = [{"full": [MBarrier(1) for _ in range(stages)], "empty": [MBarrier(2 if mutate == "local_release_only"
                                                                              else 4) for _ in range(stages)],
             "recv_full": MBarrier(1), "peer_free": MBarrier(1)} for _ in range(2)]
    named = {(kind, r): NamedBarrier(3) for kind in ("full", "empty") for r in (0, 1)}
    named |= {("ds", r): NamedBarrier(2) for r in (0, 1)}
    state = {"holds": [[set(), set()] for _ in range(2)], "recv_pending": [[0] * OWNED for _ in range(2)]}
    memory = {}  # (cta, buffer) -> step that landed there
    in_flight = []  # (cta, buffer, step, barrier)
    actors = {}
    for r in (0, 1):
        actors[f"p{r}"] = producer(r, steps, stages, bars)
        actors[f"w{r}"] = writer(r, steps, bars, mutate)
        for w in (0, 1):
            actors[f"c{r}{w}"] = consumer(r, w, steps, stages, bars, state, mutate)
    pending = {name: next(gen) for name, gen in actors.items()}
    waiting = {}  # name -> (named barrier, generation) for a bar.sync in progress

    def ready(name, op):
        if op[0] == "wait":
            return op[1].done(op[2])
        if op[0] == "sync" and name in waiting:
            bar, generation = waiting[name]
            return bar.generation > generation
        return True

    # One actor per run is slow (picked 50 times less often than the others when it can go): skew between the
    # warpgroups of a CTA is what some protocol bugs need (non_sender_waits: a whole partner step between two of
    # one warpgroup's operations), and a uniform choice almost never makes it.
    slow = rng.choice(list(actors))
    while pending or in_flight:
        choices = [n for n, op in pending.items() if ready(n, op)] + (["land"] if in_flight else [])
        if not choices:
            return "deadlock: " + ", ".join(f"{n} at {op[0]}" for n, op in pending.items())
        name = rng.choices(choices, weights=[0.02 if n == slow else 1.0 for n in choices])[0]
        if name == "land":
            cta, buffer, step, bar = in_flight.pop(rng.randrange(len(in_flight)))
            memory[(cta, buffer)] = step
            bar.complete_tx(1)
            continue
        op = pending[name]
        if op[0] == "sync" and name not in waiting:
            waiting[name] = (named[op[1]], named[op[1]].arrive())
            continue  # blocked until its generation completes
        waiting.pop(name, None)
        if op[0] == "multicast":
            _, index, part, step = op
            for cta in (0, 1):
                if any(index in held for held in state["holds"][cta]):
                    return f"stage {index} multicast into CTA {cta} while a consumer there still reads it"
                in_flight.append((cta, ("stage", index, part), step, bars[cta]["full"][index]))
        elif op[0] == "copy":
            _, cta, buffer, step, bar = op
            in_flight.append((cta, buffer, step, bar))
        elif op[0] == "send":
            _, dst, panel, step = op
            if state["recv_pending"][dst][panel % OWNED] < step:
                return f"step {step}'s dQ panel {panel} sent into CTA {dst} before it read step {step - 1}'s"
            in_flight.append((dst, ("recv", panel % OWNED), step, bars[dst]["recv_full"]))
        elif op[0] == "read":
            _, cta, buffer, want = op
            if memory.get((cta, buffer)) != want:
                return f"{name} read {buffer} of CTA {cta} = {memory.get((cta, buffer))}, expected step {want}"
        elif op[0] == "write":
            _, cta, buffer, step = op
            memory[(cta, buffer)] = step
        elif op[0] == "arrive":
            op[1].arrive()
        elif op[0] == "bar_arrive":
            named[op[1]].arrive()
        pending[name] = next(actors[name], None)
        if pending[name] is None:
            del pending[name]
    every = [b for cta in bars for b in (*cta["full"], *cta["empty"], cta["recv_full"], cta["peer_free"])]
    if any(b.pending != b.expected or b.tx for b in every) or any(b.count for b in named.values()):
        return "a barrier left partly arrived at exit"
    return None


def check(mutate=None, schedules: int = 2000) -> list[str]:
    rng = random.Random(0)
    problems = []
    for stages in (2, 3):
        for steps in range(1, 7):
            for _ in range(schedules):
                if (why := run(steps, stages, rng, mutate)) is not None:
                    problems.append(f"stages {stages} steps {steps}: {why}")
                    break
    return problems


def main() -> int:
    problems = check()
    print("cluster protocol: " + ("ok" if not problems else "FAIL\n  " + "\n  ".join(problems)))
    for mutate in MUTATIONS:
        caught = check(mutate, schedules=300)
        print(f"mutation {mutate}: " + (f"caught ({caught[0]})" if caught else "NOT caught"))
        if not caught:
            problems.append(mutate)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
