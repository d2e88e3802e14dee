//! What the CPU says about its caches, for kernels that size their blocks
//! to them.

use std::sync::OnceLock;

/// Assumed when the CPU does not say: the smallest L2 among the x86-64
/// server cores of the last decade that our AVX2 kernels were measured on
/// (a Zen 3 EPYC's).
const FALLBACK_L2_BYTES: usize = 512 << 10;

/// The size of one core's L2 cache in bytes, from CPUID leaf 0x8000_0006
/// (ECX bits 31-16, in KiB; AMD and Intel both report it there), read
/// once. [`FALLBACK_L2_BYTES`] on other machines, or when the leaf is
/// missing or reports nothing.
pub(crate) fn l2_bytes() -> usize {
    static L2: OnceLock<usize> = OnceLock::new();
    *L2.get_or_init(|| read_l2_kib().map_or(FALLBACK_L2_BYTES, |kib| kib << 10))
}

#[cfg(target_arch = "x86_64")]
fn read_l2_kib() -> Option<usize> {
    use std::arch::x86_64::__cpuid;
    // Leaf 0x8000_0000 reports the highest extended leaf, so 0x8000_0006
    // is only asked for where it exists.
    let highest = __cpuid(0x8000_0000).eax;
    if highest < 0x8000_0006 {
        return None;
    }
    let kib = (__cpuid(0x8000_0006).ecx >> 16) as usize;
    (kib > 0).then_some(kib)
}

#[cfg(not(target_arch = "x86_64"))]
fn read_l2_kib() -> Option<usize> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn l2_size_is_whole_kib_and_plausible() {
        let l2 = l2_bytes();
        assert_eq!(l2 % 1024, 0, "{l2}");
        // From the smallest L2 of any x86-64 core (128 KiB) to the largest
        // shipped so far (a few MiB), with room to grow.
        assert!((128 << 10..=64 << 20).contains(&l2), "{l2} bytes");
    }
}
