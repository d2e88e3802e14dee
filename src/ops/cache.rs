//! What the CPU says about its caches, for kernels that size their blocks
//! to them, and about its maker, for the few choices measured differently
//! on Intel's and AMD's cores.

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

/// True when CPUID's vendor string is Intel's ("GenuineIntel"), read once.
pub(crate) fn intel() -> bool {
    static INTEL: OnceLock<bool> = OnceLock::new();
    *INTEL.get_or_init(|| vendor() == Some(*b"GenuineIntel"))
}

#[cfg(target_arch = "x86_64")]
fn vendor() -> Option<[u8; 12]> {
    let leaf0 = std::arch::x86_64::__cpuid(0);
    let mut v = [0u8; 12];
    // The string's three words come in EBX, EDX, ECX order.
    for (i, word) in [leaf0.ebx, leaf0.edx, leaf0.ecx].into_iter().enumerate() {
        v[4 * i..4 * i + 4].copy_from_slice(&word.to_le_bytes());
    }
    Some(v)
}

#[cfg(not(target_arch = "x86_64"))]
fn vendor() -> Option<[u8; 12]> {
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

    /// The vendor string is printable ASCII where CPUID gives one, and
    /// `intel` agrees with what /proc/cpuinfo says on Linux.
    #[test]
    fn vendor_is_read_as_cpuinfo_shows_it() {
        if let Some(v) = vendor() {
            assert!(v.iter().all(|b| b.is_ascii_graphic()), "{v:?}");
        }
        if let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") {
            if let Some(line) = info.lines().find(|l| l.starts_with("vendor_id")) {
                assert_eq!(intel(), line.contains("GenuineIntel"), "{line}");
            }
        }
    }
}
