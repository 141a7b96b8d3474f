//! `memory`: allocates memory and writes to every page of it, so it is
//! really resident (and counts against the cgroup the helper runs under),
//! then holds it until the agent ends.

use crate::flag;

const PAGE: usize = 4096;
const CHUNK: usize = 16 << 20;

pub fn run(args: &[String]) -> Result<(), String> {
    let bytes: u64 = flag(args, "--bytes").and_then(|b| b.parse().ok()).ok_or("--bytes B is required")?;
    let mut held: Vec<Vec<u8>> = Vec::new();
    let mut left = bytes as usize;
    while left > 0 {
        let size = left.min(CHUNK);
        let mut chunk = vec![0u8; size];
        // Zeroed memory may be mapped lazily: write a byte a page so the
        // kernel backs every page for real.
        for i in (0..size).step_by(PAGE) {
            chunk[i] = 1;
        }
        held.push(chunk);
        left -= size;
    }
    crate::lifecycle::ready(&format!("holding {bytes} bytes, every page touched"));
    loop {
        std::thread::park();
        std::hint::black_box(&held);
    }
}
