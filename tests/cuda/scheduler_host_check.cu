// Host-side check of kernels/hopper/fast_div.cuh and the persistent scheduler (kernels/hopper/scheduler.cuh): built
// with nvcc and run on the CPU by tests/test_fast_div.py. Prints one summary line; exit code 1 on any mismatch.
//   1. FastDiv against plain division: every divisor 1..4096 with every n < 65536; n just below, at and above
//      multiples across [0, 2^31) for divisors up to 2^31 - 1 (powers of two, their neighbours, pseudo-random ones).
//   2. A FastDiv with its multiplier off by one must disagree somewhere (the check can fail).
//   3. The scheduler's walk (first / next / valid / decode) of every CTA equals the walk computed with plain division
//      (the scheduler as it was before FastDiv), over grids of shapes, sections, deals and CTA counts.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "../../kernels/hopper/scheduler.cuh"

using fa3nn::hopper::FastDiv;
using fa3nn::hopper::StaticPersistentScheduler;
using fa3nn::hopper::Tile;
using fa3nn::hopper::TileDeal;

static long long checks = 0;
static int failures = 0;

static void check_div(int d, int n) {
  ++checks;
  const FastDiv f(d);
  int rem = -1;
  const int q = f.divmod(n, rem);
  if (q != n / d || rem != n % d) {
    if (failures++ < 10) std::printf("FastDiv(%d) of %d: %d rem %d, expected %d rem %d\n", d, n, q, rem, n / d, n % d);
  }
}

static void check_near_multiples(int d) {
  const long long top = (1LL << 31) - 1;
  const long long last = top / d;
  for (long long k : {0LL, 1LL, 2LL, 3LL, 7LL, 1000LL, last / 3, last / 2, last - 1, last}) {
    for (long long n : {k * d - 1, k * d, k * d + 1}) {
      if (n >= 0 && n <= top) check_div(d, static_cast<int>(n));
    }
  }
  check_div(d, static_cast<int>(top));
}

// The scheduler before FastDiv: plain divisions (the reference walk).
struct Reference {
  int num_m_blocks, num_heads, num_bh, heads_per_section, cta, grid;
  bool longest_first, snake;
  int next(int tile) const {
    if (!(longest_first && snake)) return tile + grid;
    const int round = tile / grid + 1;
    return round * grid + ((round & 1) ? grid - 1 - cta : cta);
  }
  Tile decode(int tile) const {
    Tile t;
    int bh;
    if (longest_first) {
      const int section_tiles = heads_per_section * num_m_blocks;
      const int section = tile / section_tiles;
      const int first_bh = section * heads_per_section;
      const int heads_here = std::min(heads_per_section, num_bh - first_bh);
      const int i = tile - section * section_tiles;
      t.m_block = num_m_blocks - 1 - i / heads_here;
      bh = first_bh + i % heads_here;
    } else {
      t.m_block = tile % num_m_blocks;
      bh = tile / num_m_blocks;
    }
    t.head = bh % num_heads;
    t.batch = bh / num_heads;
    return t;
  }
};

static long long walked = 0;

template <bool kLongestFirst>
static void check_walk(int m_blocks, int heads, int batch, int per_section, int snake, int grid) {
  for (int cta = 0; cta < grid; ++cta) {
    const TileDeal deal = TileDeal::make(m_blocks, heads, batch, per_section, snake, grid);
    const StaticPersistentScheduler<kLongestFirst> s(deal, cta);
    const Reference r{m_blocks, heads, heads * batch, per_section, cta, grid, kLongestFirst, snake != 0};
    const int tiles = m_blocks * heads * batch;
    int tile = s.first(), ref = cta;
    while (true) {
      const bool ok = s.valid(tile), ref_ok = ref < tiles;
      if (tile != ref || ok != ref_ok) {
        if (failures++ < 10) std::printf("walk: tile %d, reference %d\n", tile, ref);
        return;
      }
      if (!ok) break;
      const Tile a = s.decode(tile), b = r.decode(ref);
      ++walked;
      if (a.m_block != b.m_block || a.head != b.head || a.batch != b.batch) {
        if (failures++ < 10)
          std::printf("decode(%d) m_blocks %d heads %d batch %d section %d: (%d, %d, %d), expected (%d, %d, %d)\n",
                      tile, m_blocks, heads, batch, per_section, a.m_block, a.head, a.batch, b.m_block, b.head,
                      b.batch);
      }
      tile = s.next(tile);
      ref = r.next(ref);
    }
  }
}

int main() {
  for (int d = 1; d <= 4096; ++d)
    for (int n = 0; n < 65536; ++n) check_div(d, n);
  std::vector<int> divisors;
  for (int k = 0; k < 31; ++k) {
    const long long p = 1LL << k;
    for (long long d : {p - 1, p, p + 1, 3 * p / 2})
      if (d >= 1 && d < (1LL << 31)) divisors.push_back(static_cast<int>(d));
  }
  uint32_t x = 12345;
  for (int i = 0; i < 20000; ++i) {  // xorshift: divisors spread over [1, 2^31)
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    divisors.push_back(static_cast<int>(x >> (1 + i % 31)) | 1);
  }
  divisors.push_back(2147483647);
  for (int d : divisors) check_near_multiples(d);
  const int divisions_failed = failures;

  // 2. A multiplier one too small must be caught by the same checks.
  int caught = 0;
  for (int d : {3, 7, 100, 641, 132}) {
    FastDiv wrong(d);
    wrong.multiplier -= 1;
    for (int n = 0; n < (1 << 20) && !caught; ++n)
      if (wrong.div(n) != n / d) caught = 1;
  }
  if (!caught) {
    ++failures;
    std::printf("a FastDiv with a wrong multiplier passed\n");
  }

  for (int m_blocks : {1, 2, 3, 5, 8, 17})
    for (int heads : {1, 3, 8})
      for (int batch : {1, 2, 5})
        for (int grid : {1, 3, 7, 132}) {
          check_walk<false>(m_blocks, heads, batch, heads * batch, 0, grid);
          for (int per_section : {1, 2, 3, 7, heads * batch})
            for (int snake : {0, 1}) check_walk<true>(m_blocks, heads, batch, per_section, snake, grid);
        }

  std::printf("checked %lld divisions (%d wrong), a wrong multiplier %s, %lld scheduler tiles; %d failures\n", checks,
              divisions_failed, caught ? "caught" : "NOT caught", walked, failures);
  return failures ? 1 : 0;
}
