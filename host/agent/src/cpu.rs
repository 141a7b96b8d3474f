//! `cpu`: burns CPU at a duty cycle. `--cpus C --percent P` keeps C CPUs'
//! worth of threads busy P % of every 100 ms period, so the target's cgroup
//! (which the helper runs under) shows C × P % of one CPU.

use std::time::{Duration, Instant};

use crate::flag;

const PERIOD: Duration = Duration::from_millis(100);

pub fn run(args: &[String]) -> Result<(), String> {
    let percent: f64 = flag(args, "--percent").and_then(|p| p.parse().ok()).ok_or("--percent P is required")?;
    let cpus: f64 = flag(args, "--cpus").and_then(|c| c.parse().ok()).unwrap_or(1.0);
    if !(0.0..=100.0).contains(&percent) || !(0.01..=1024.0).contains(&cpus) {
        return Err(format!("--percent must be 0-100 and --cpus 0.01-1024, not {percent} and {cpus}"));
    }
    // Spread the load over whole threads: 1.5 CPUs at 50 % is two threads at 37.5 %.
    let threads = cpus.ceil() as usize;
    let duty = (percent / 100.0 * cpus / threads as f64).clamp(0.0, 1.0);
    let busy = PERIOD.mul_f64(duty);
    let workers: Vec<_> = (0..threads).map(|_| std::thread::spawn(move || burn(busy))).collect();
    crate::lifecycle::ready(&format!("burning {percent} % of {cpus} CPUs on {threads} threads"));
    for worker in workers {
        let _ = worker.join();
    }
    Ok(())
}

fn burn(busy: Duration) {
    let mut x: u64 = 1;
    loop {
        let start = Instant::now();
        while start.elapsed() < busy {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        std::thread::sleep(PERIOD.saturating_sub(start.elapsed()));
    }
}
