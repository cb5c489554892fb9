//! The spec's random generators (clause 4.3.2 and 2.1.6): uniform integers, NURand,
//! a-strings and n-strings, and customer last names built from syllables.
//!
//! Everything is drawn from one seeded xoshiro256++ stream, so a seed fixes a whole run:
//! two engines fed from the same seed see exactly the same transaction inputs.

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

/// Alphabet of a-strings: the spec asks for at least the 26 lower-case letters, the 26
/// upper-case letters and the 10 digits.
const ALNUM: &[u8; 62] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/// The ten syllables of clause 4.3.2.3; a last name is three of them, picked by the
/// hundreds, tens and ones digit of a number in `0..=999`.
pub const SYLLABLES: [&str; 10] = [
    "BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING",
];

/// The three NURand run-time constants `C` (clause 2.1.6): one per value of `A`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NuRandC {
    /// `C` for customer last names (`A = 255`).
    pub c_last: u32,
    /// `C` for customer ids (`A = 1023`).
    pub c_id: u32,
    /// `C` for item ids (`A = 8191`).
    pub ol_i_id: u32,
}

impl NuRandC {
    /// Draws the constants used by the loader.
    pub fn for_load(rng: &mut TpccRng) -> Self {
        Self {
            c_last: rng.uniform(0, 255),
            c_id: rng.uniform(0, 1023),
            ol_i_id: rng.uniform(0, 8191),
        }
    }

    /// Draws run-time constants that satisfy clause 2.1.6.1 relative to the loader's
    /// `c_last`: the difference lies in `65..=119` and is neither 96 nor 112, so the
    /// last names looked up at run time are not the ones favoured at load time.
    pub fn for_run(rng: &mut TpccRng, c_last_load: u32) -> Self {
        let delta = loop {
            let d = rng.uniform(65, 119);
            if d != 96 && d != 112 {
                break d;
            }
        };
        Self {
            c_last: (c_last_load + delta) % 256,
            c_id: rng.uniform(0, 1023),
            ol_i_id: rng.uniform(0, 8191),
        }
    }
}

/// The seeded random stream of a loader or a terminal.
#[derive(Clone, Debug)]
pub struct TpccRng(Xoshiro256PlusPlus);

impl TpccRng {
    /// A stream fixed by `seed`.
    pub fn new(seed: u64) -> Self {
        Self(Xoshiro256PlusPlus::seed_from_u64(seed))
    }

    /// Uniform integer in `lo..=hi`.
    #[inline]
    pub fn uniform(&mut self, lo: u32, hi: u32) -> u32 {
        self.0.random_range(lo..=hi)
    }

    /// Uniform 64-bit integer in `lo..=hi`.
    #[inline]
    pub fn uniform_i64(&mut self, lo: i64, hi: i64) -> i64 {
        self.0.random_range(lo..=hi)
    }

    /// `NURand(A, x, y) = (((random(0, A) | random(x, y)) + C) % (y - x + 1)) + x`.
    #[inline]
    pub fn nurand(&mut self, a: u32, x: u32, y: u32, c: u32) -> u32 {
        (((self.uniform(0, a) | self.uniform(x, y)) + c) % (y - x + 1)) + x
    }

    /// Appends a random a-string whose length is uniform in `min..=max`.
    pub fn a_string(&mut self, min: usize, max: usize, out: &mut String) {
        let len = self.0.random_range(min..=max);
        out.reserve(len);
        for _ in 0..len {
            out.push(ALNUM[self.0.random_range(0..ALNUM.len())] as char);
        }
    }

    /// Appends a random n-string (digits) whose length is uniform in `min..=max`.
    pub fn n_string(&mut self, min: usize, max: usize, out: &mut String) {
        let len = self.0.random_range(min..=max);
        for _ in 0..len {
            out.push((b'0' + self.0.random_range(0..10u8)) as char);
        }
    }

    /// Appends a zip code: four random digits followed by `11111` (clause 4.3.2.7).
    pub fn zip(&mut self, out: &mut String) {
        self.n_string(4, 4, out);
        out.push_str("11111");
    }

    /// Appends `I_DATA` / `S_DATA`: an a-string of 26 to 50 characters; in 10% of the
    /// rows the word `ORIGINAL` replaces characters at a random position (clause 4.3.3.1).
    pub fn data_with_original(&mut self, out: &mut String) {
        let start = out.len();
        self.a_string(26, 50, out);
        if self.uniform(1, 10) == 1 {
            let len = out.len() - start;
            let at = start + self.0.random_range(0..=len - ORIGINAL.len());
            out.replace_range(at..at + ORIGINAL.len(), ORIGINAL);
        }
    }
}

/// The marker whose presence in both `I_DATA` and `S_DATA` makes an item "brand".
pub const ORIGINAL: &str = "ORIGINAL";

/// Appends the last name for `num` in `0..=999` (clause 4.3.2.3).
pub fn last_name(num: u32, out: &mut String) {
    debug_assert!(num < 1000);
    out.push_str(SYLLABLES[(num / 100) as usize]);
    out.push_str(SYLLABLES[(num / 10 % 10) as usize]);
    out.push_str(SYLLABLES[(num % 10) as usize]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nurand_stays_in_range_and_is_skewed() {
        let mut rng = TpccRng::new(7);
        let mut hits = vec![0u32; 3001];
        for _ in 0..200_000 {
            let v = rng.nurand(1023, 1, 3000, 259);
            assert!((1..=3000).contains(&v), "{v} out of range");
            hits[v as usize] += 1;
        }
        for _ in 0..100_000 {
            let v = rng.nurand(8191, 1, 100_000, 7911);
            assert!((1..=100_000).contains(&v));
            let v = rng.nurand(255, 0, 999, 223);
            assert!(v <= 999);
        }
        // NURand is not uniform: the hottest id is drawn far more often than average.
        let max = *hits.iter().max().unwrap();
        let mean = 200_000 / 3000;
        assert!(max > 3 * mean, "max {max} vs mean {mean}: not skewed");
    }

    #[test]
    fn uniform_is_inclusive() {
        let mut rng = TpccRng::new(1);
        let mut seen = [false; 11];
        for _ in 0..10_000 {
            let v = rng.uniform(5, 15);
            seen[(v - 5) as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn last_names_follow_the_syllable_table() {
        let mut s = String::new();
        last_name(371, &mut s);
        assert_eq!(s, "PRICALLYOUGHT");
        s.clear();
        last_name(0, &mut s);
        assert_eq!(s, "BARBARBAR");
        s.clear();
        last_name(999, &mut s);
        assert_eq!(s, "EINGEINGEING");
        // Every name fits C_LAST (16 characters).
        for n in 0..1000 {
            s.clear();
            last_name(n, &mut s);
            assert!(s.len() <= 16 && s.len() >= 9, "{s}");
        }
    }

    #[test]
    fn run_constant_respects_the_delta_rule() {
        let mut rng = TpccRng::new(99);
        for load in 0..=255 {
            let run = NuRandC::for_run(&mut rng, load);
            let delta = (run.c_last + 256 - load) % 256;
            assert!((65..=119).contains(&delta) && delta != 96 && delta != 112);
        }
    }

    #[test]
    fn strings_have_the_requested_shape() {
        let mut rng = TpccRng::new(3);
        let mut originals = 0;
        for _ in 0..10_000 {
            let mut s = String::new();
            rng.a_string(8, 16, &mut s);
            assert!((8..=16).contains(&s.len()));
            assert!(s.bytes().all(|b| b.is_ascii_alphanumeric()));
            s.clear();
            rng.zip(&mut s);
            assert_eq!(s.len(), 9);
            assert!(s.ends_with("11111") && s.bytes().all(|b| b.is_ascii_digit()));
            s.clear();
            rng.data_with_original(&mut s);
            assert!((26..=50).contains(&s.len()));
            originals += usize::from(s.contains(ORIGINAL));
        }
        // 10% with ORIGINAL, give or take sampling noise.
        assert!((800..=1200).contains(&originals), "{originals}");
    }
}
