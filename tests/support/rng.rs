//! The tests' random numbers: xorshift64 (Marsaglia, 2003), seeded by hand so
//! that a failing case repeats from its seed. Not for anything but tests.
//!
//! This file has no dependencies so that the library's unit tests can
//! include it too (`src/lib.rs`): one generator for every test target.

pub struct Rng(u64);

impl Rng {
    /// `seed` must not be zero (xorshift would stay at zero).
    pub fn new(seed: u64) -> Rng {
        assert_ne!(seed, 0, "xorshift64 needs a non-zero seed");
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A value in `0..m`. The modulo bias (below 2^-50 for the small `m`
    /// tests use) does not matter for picking test cases.
    pub fn below(&mut self, m: u64) -> u64 {
        self.next_u64() % m
    }

    /// One of the 2001 values `k / 1000` in [-1, 1]: small enough that
    /// products and sums stay far from overflow and underflow.
    pub fn signed_unit(&mut self) -> f64 {
        self.below(2001) as f64 / 1000.0 - 1.0
    }
}
