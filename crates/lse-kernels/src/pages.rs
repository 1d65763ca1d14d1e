//! Huge pages for the buffers a decode step streams. With 4 KiB pages a step over ~400 MB of
//! packed weights crosses ~100k pages, each a TLB miss and a stop of the hardware prefetcher's
//! stream at its boundary; 2 MiB pages (transparent huge pages, asked for per region: where the
//! system's setting is `madvise` only regions that ask get them) took one Qwen2.5-Coder decode
//! session from 54–57 to 65 tokens/s. The matrices under a page share one [`HugeArena`]: one
//! SmolLM2 session (its layers' matrices 0.1–0.6 MB each) decoded 7–32 % faster, 26 → 92 MiB of
//! its 96 MB on huge pages. Scoring gains nothing (a pass reads each matrix from cache for 512
//! rows), and in a VM the first touch of fresh huge pages can cost ~0.8 s per 250 MB: the engine
//! asks for them where it decodes.

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

/// Where a packed copy takes its memory.
#[derive(Clone, Copy)]
pub enum Pages<'a> {
    /// A vector of its own on the system's pages (scoring: each matrix is read from cache).
    Small,
    /// On huge pages: a piece of the arena, or (none given, or no room left) a vector of its own
    /// asking for them.
    Huge(Option<&'a std::sync::Arc<HugeArena>>),
}

/// One reservation of address space, asking for huge pages, that packed matrices take their
/// memory from one after another: most of a model's matrices are smaller than a 2 MiB page (a
/// SmolLM2 layer's are 0.1–0.6 MB) and, each in its own vector, would never get one. The
/// reservation is made writable 2 MiB at a time as pieces are taken (so that a system counting
/// writable memory against a commit limit counts only those), only what is taken is ever
/// touched, and the memory goes back when the last piece is dropped.
pub struct HugeArena {
    /// The mapping, and its first 2 MiB boundary (where the pieces start).
    mapped: usize,
    base: usize,
    cap: usize,
    /// The next free byte and the end of the writable part, both offsets from `base`.
    next: std::sync::Mutex<(usize, usize)>,
}

const HUGE: usize = 2 << 20;

impl HugeArena {
    /// Reserves `cap` bytes; `None` where the system gives no such reservation.
    pub fn new(cap: usize) -> Option<std::sync::Arc<HugeArena>> {
        let cap = cap.checked_next_multiple_of(HUGE)?;
        let mapped = reserve(cap.checked_add(HUGE)?)?;
        let base = mapped.next_multiple_of(HUGE);
        advise(base, cap);
        Some(std::sync::Arc::new(HugeArena { mapped, base, cap, next: std::sync::Mutex::new((0, 0)) }))
    }

    /// `bytes` of zeroed memory aligned to 64, or `None` once the reservation is used up.
    pub fn take(&self, bytes: usize) -> Option<*mut u8> {
        let mut g = self.next.lock().unwrap_or_else(|e| e.into_inner());
        let (at, open) = *g;
        let end = at.checked_add(bytes.checked_next_multiple_of(64)?).filter(|&e| e <= self.cap)?;
        if end > open {
            let to = end.next_multiple_of(HUGE).min(self.cap);
            if !writable(self.base + open, to - open) {
                return None;
            }
            g.1 = to;
        }
        g.0 = end;
        Some((self.base + at) as *mut u8)
    }
}

impl Drop for HugeArena {
    fn drop(&mut self) {
        release(self.mapped, self.cap + HUGE);
    }
}

#[cfg(target_os = "linux")]
fn reserve(bytes: usize) -> Option<usize> {
    // SAFETY: a fresh private anonymous mapping, no access until `writable`; nothing else is touched
    let p = unsafe { libc::mmap(std::ptr::null_mut(), bytes, libc::PROT_NONE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE, -1, 0) };
    (p != libc::MAP_FAILED).then_some(p as usize)
}

#[cfg(target_os = "linux")]
fn writable(start: usize, bytes: usize) -> bool {
    // SAFETY: a range of the reservation no piece has been handed out from yet
    unsafe { libc::mprotect(start as *mut libc::c_void, bytes, libc::PROT_READ | libc::PROT_WRITE) == 0 }
}

#[cfg(target_os = "linux")]
fn release(base: usize, bytes: usize) {
    // SAFETY: the mapping made by `reserve`, no piece of which is alive any more
    unsafe { libc::munmap(base as *mut libc::c_void, bytes) };
}

#[cfg(not(target_os = "linux"))]
fn reserve(_bytes: usize) -> Option<usize> {
    None
}

#[cfg(not(target_os = "linux"))]
fn writable(_start: usize, _bytes: usize) -> bool {
    false
}

#[cfg(not(target_os = "linux"))]
fn release(_base: usize, _bytes: usize) {}

#[cfg(target_os = "linux")]
fn advise(start: usize, bytes: usize) {
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
    /// Pieces are aligned, zeroed, apart, and refused once the room is used up.
    #[test]
    fn arena_pieces_are_apart_and_bounded() {
        let a = super::HugeArena::new(4 << 20).expect("an arena");
        let p = a.take(100).unwrap() as usize;
        let q = a.take(3 << 20).unwrap() as usize;
        assert!(p.is_multiple_of(64) && q.is_multiple_of(64) && q >= p + 128);
        // SAFETY: the piece is `3 << 20` bytes of the arena's, untouched until now
        let piece = unsafe { std::slice::from_raw_parts_mut(q as *mut u8, 3 << 20) };
        assert!(piece.iter().all(|&b| b == 0));
        piece.fill(1);
        assert!(a.take(1 << 20).is_none() && a.take(64).is_some());
    }

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
