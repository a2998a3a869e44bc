"""A model of BwdQueryWalk (kernels/hopper/flash_bwd.cuh): the steps one backward CTA walks under GQA/MQA, checked
exhaustively on small shapes. CPU only.

A CTA owns key block n_block of K/V head kv_head; it visits every query head h = kv_head * group + g of the group
(g = 0 .. group - 1), each over the query blocks [begin, num_m_blocks), as one flat sequence of total = group * (
num_m_blocks - begin) steps; advance() moves to the next step without a division. The overlap consumer hands step
j - 1's dQ off during step j, and the last one after the loop, through prev_head() / prev_m_block(). Transcribed from
the kernel by hand (like model_bwd_dq_handoff.py):

    begin = first_m_block; total = group * (end - begin); head = kv_head * group; m_block = begin
    advance:       m_block += 1; if m_block == end: m_block = begin; head += 1
    prev_head:     head - 1 if m_block == begin else head
    prev_m_block:  end - 1 if m_block == begin else m_block - 1

Checks, for group 1..5, kv_head 0..2, 1..6 query blocks and every begin: the walk visits exactly the (head, block)
pairs of the group, each once, heads in order and blocks ascending within a head (the order the producer fills the
ring in and the consumers read it); the previous-step accessors name the step before, at every step after the first
and after the loop (the last step). That the step count is total is what the bulk-dQ handoff model
(model_bwd_dq_handoff.py, steps = total) and the overlap model take as given.

    python scripts/model_bwd_query_walk.py
"""

from __future__ import annotations

import sys


class Walk:
    def __init__(self, begin: int, end: int, group: int, kv_head: int):
        self.begin, self.end = begin, end
        self.total = group * (end - begin)
        self.head, self.m_block = kv_head * group, begin

    def advance(self) -> None:
        self.m_block += 1
        if self.m_block == self.end:
            self.m_block = self.begin
            self.head += 1

    def prev_head(self) -> int:
        return self.head - 1 if self.m_block == self.begin else self.head

    def prev_m_block(self) -> int:
        return self.end - 1 if self.m_block == self.begin else self.m_block - 1


def check(begin: int, end: int, group: int, kv_head: int, walk_cls=Walk) -> str | None:
    """One shape; returns what went wrong, or None."""
    walk = walk_cls(begin, end, group, kv_head)
    expected = [(kv_head * group + g, m) for g in range(group) for m in range(begin, end)]
    seen = []
    for step in range(walk.total):
        if step > 0 and (walk.prev_head(), walk.prev_m_block()) != seen[-1]:
            return f"step {step}: previous step named {(walk.prev_head(), walk.prev_m_block())}, was {seen[-1]}"
        seen.append((walk.head, walk.m_block))
        walk.advance()
    if seen != expected:
        return f"visited {seen}, expected {expected}"
    if (walk.prev_head(), walk.prev_m_block()) != expected[-1]:
        return f"after the loop the previous step is {(walk.prev_head(), walk.prev_m_block())}, not {expected[-1]}"
    return None


def main(walk_cls=Walk) -> int:
    failures = 0
    for group in range(1, 6):
        for end in range(1, 7):
            for begin in range(end):
                for kv_head in range(3):
                    if (why := check(begin, end, group, kv_head, walk_cls)) is not None:
                        failures += 1
                        print(f"group {group}, blocks [{begin}, {end}), kv_head {kv_head}: {why}")
    print("query walk model:", "FAILED" if failures else "ok (group 1-5, 1-6 query blocks, every first block)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
