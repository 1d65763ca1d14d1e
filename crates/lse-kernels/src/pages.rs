//! Huge pages for the buffers a decode step streams. With 4 KiB pages a step over ~400 MB of
//! packed weights crosses ~100k pages, each a TLB miss and a stop of the hardware prefetcher's
//! stream at its boundary; 2 MiB pages (transparent huge pages, asked for per region: where the
//! system's setting is `madvise` only regions that ask get them) took one Qwen2.5-Coder decode
//! session from 54–57 to 65 tokens/s. Scoring
//! gains nothing (a pass reads each matrix from cache for 512 rows), and in a VM the first touch
//! of fresh huge pages can cost ~0.8 s per 250 MB: the engine asks for them where it decodes.

/// A vector of `len` copies of `fill` whose whole 2 MiB pages the kernel is asked to back with
/// huge pages (before any is touched: pages already mapped stay small). A hint: where the kernel
/// has none to give, the pages are small and nothing else changes. (A vector the allocator
/// places in its heap leaves that stretch of the heap asking for huge pages after it is freed.)
pub fn huge_page_vec<T: Clone>(len: usize, fill: T) -> Vec<T> {
    let mut v: Vec<T> = Vec::with_capacity(len);
    advise(v.as_ptr() as usize, len * std::mem::size_of::<T>());
    v.resize(len, fill);
    v
}

#[cfg(target_os = "linux")]
fn advise(start: usize, bytes: usize) {
    const HUGE: usize = 2 << 20;
    let (from, to) = ((start + HUGE - 1) & !(HUGE - 1), (start + bytes) & !(HUGE - 1));
    if to > from {
        // SAFETY: the range lies inside the vector's allocation; the advice changes no contents
        unsafe { libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_HUGEPAGE) };
    }
}

#[cfg(not(target_os = "linux"))]
fn advise(_start: usize, _bytes: usize) {}

#[cfg(test)]
mod tests {
    #[test]
    fn contents_are_the_fill() {
        let v = super::huge_page_vec(5 << 20, 7u8);
        assert!(v.len() == 5 << 20 && v.iter().all(|&b| b == 7));
        assert!(super::huge_page_vec(0, 1u64).is_empty());
    }

    /// The advice reaches the kernel: the mapping holding the vector's whole 2 MiB pages is
    /// flagged `hg` (MADV_HUGEPAGE) in /proc/self/smaps, on any kernel with transparent huge pages.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_mapping_asks_for_huge_pages() {
        if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
            return;
        }
        let v = super::huge_page_vec(8 << 20, 0u8);
        let inside = ((v.as_ptr() as usize) + (2 << 20) - 1) & !((2 << 20) - 1);
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut here = false;
        let mut flags = None;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ').filter(|(r, _)| r.contains('-') && !r.ends_with(':')) {
                let (a, b) = range.split_once('-').unwrap();
                let (a, b) = (usize::from_str_radix(a, 16).unwrap_or(0), usize::from_str_radix(b, 16).unwrap_or(0));
                here = (a..b).contains(&inside);
            } else if here && line.starts_with("VmFlags:") {
                flags = Some(line.to_string());
            }
        }
        let flags = flags.expect("the vector's mapping is listed");
        assert!(flags.split_whitespace().any(|f| f == "hg"), "{flags}");
    }
}
