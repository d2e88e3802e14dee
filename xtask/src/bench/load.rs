//! What else the machine did while a section of the bench ran: the CPU
//! time of processes other than the bench's, and the time the hypervisor
//! ran something else on our virtual CPUs (steal), both from Linux's tick
//! counters. A ratio measured while either was large measures that load
//! as much as the kernels; the bench prints it and keeps it in the JSON
//! rather than leave a reader to guess why two runs disagree (the first
//! run on a freshly started machine here gave CenterCropPad 0.68 of the
//! copy, the next ones 1.2-1.5, and nothing at the time said why).

use std::path::Path;

/// At least this share of the machine's CPU time spent elsewhere (other
/// processes, or steal) gets a warning printed.
const WARN_SHARE: f64 = 0.05;

/// Ticks of all CPUs since boot (`/proc/stat`'s first line).
#[derive(Clone, Copy, Debug, PartialEq, Default)]
struct SystemTicks {
    /// user, nice, system, irq and softirq.
    busy: u64,
    /// Every tick counted, steal included (guest time is already in user).
    total: u64,
    steal: u64,
}

/// Parses the aggregate line of `/proc/stat`: `cpu user nice system idle
/// iowait irq softirq steal ...`.
fn parse_system(stat: &str) -> Option<SystemTicks> {
    let line = stat.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    if v.len() < 4 {
        return None;
    }
    let (user, nice, system, idle, iowait, irq, softirq, steal) =
        (at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7));
    let busy = user + nice + system + irq + softirq;
    Some(SystemTicks {
        busy,
        total: busy + idle + iowait + steal,
        steal,
    })
}

/// Parses a process's user plus system ticks (all its threads) from
/// `/proc/<pid>/stat`: fields 14 and 15, counted after the command name,
/// which is in parentheses and may itself hold spaces and parentheses.
fn parse_process(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (the state).
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some(utime + stime)
}

fn read_system() -> Option<SystemTicks> {
    parse_system(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// The ticks of this process and of `pids` (processes the bench started),
/// counting a process that has gone as zero.
fn read_own(pids: &[u32]) -> u64 {
    let read = |p: &Path| {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|s| parse_process(&s))
            .unwrap_or(0)
    };
    read(Path::new("/proc/self/stat"))
        + pids
            .iter()
            .map(|pid| read(&Path::new("/proc").join(pid.to_string()).join("stat")))
            .sum::<u64>()
}

/// One section's load from elsewhere, as shares of all CPUs' time.
#[derive(serde::Serialize, Debug, Clone, PartialEq)]
pub struct SectionLoad {
    pub section: String,
    /// CPU time of processes other than the bench's (and the kernel's work
    /// for them), over all CPUs' time.
    pub other_processes_share: f64,
    /// Time the hypervisor took from our virtual CPUs, over all CPUs' time.
    pub steal_share: f64,
}

/// Tick counters at the start of a section.
pub struct Watch {
    system: Option<SystemTicks>,
    own: u64,
}

impl Watch {
    /// Starts watching; `pids` are processes the bench started whose CPU
    /// time is the bench's own (the onnxruntime server).
    pub fn start(pids: &[u32]) -> Watch {
        Watch {
            system: read_system(),
            own: read_own(pids),
        }
    }

    /// The section's load, or None where Linux's counters cannot be read
    /// (another OS) or too little time passed to tell.
    pub fn finish(&self, section: &str, pids: &[u32]) -> Option<SectionLoad> {
        let end = read_system()?;
        let own = read_own(pids);
        shares(section, self.system?, end, own.saturating_sub(self.own))
    }
}

/// The shares between two readings, `own` of whose busy ticks were the
/// bench's.
fn shares(section: &str, a: SystemTicks, b: SystemTicks, own: u64) -> Option<SectionLoad> {
    let total = b.total.checked_sub(a.total)?;
    // Ticks come at 100 Hz per CPU: under half a second of two CPUs is
    // too coarse to give a share (CenterCropPad's section takes about 0.6).
    if total < 100 {
        return None;
    }
    let busy = b.busy.saturating_sub(a.busy);
    Some(SectionLoad {
        section: section.into(),
        other_processes_share: busy.saturating_sub(own) as f64 / total as f64,
        steal_share: b.steal.saturating_sub(a.steal) as f64 / total as f64,
    })
}

/// Prints a warning when the section ran beside load from elsewhere.
pub fn warn(load: &SectionLoad) {
    if load.other_processes_share >= WARN_SHARE || load.steal_share >= WARN_SHARE {
        println!(
            "warning: while the {} figures ran, other processes used {:.0}% of the machine's CPU \
             time and the hypervisor took {:.0}% (steal): these figures measure that load too",
            load.section,
            100.0 * load.other_processes_share,
            100.0 * load.steal_share
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_aggregate_cpu_line() {
        let stat = "cpu  44093 7 6575 1749165 469 3 68 1065 12 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n";
        assert_eq!(
            parse_system(stat),
            Some(SystemTicks {
                busy: 44093 + 7 + 6575 + 3 + 68,
                total: 44093 + 7 + 6575 + 3 + 68 + 1749165 + 469 + 1065,
                steal: 1065,
            })
        );
        // Old kernels stop before steal.
        let old = parse_system("cpu 10 0 5 100\n").unwrap();
        assert_eq!((old.busy, old.total, old.steal), (15, 115, 0));
        assert_eq!(parse_system("cpu0 1 2 3 4\n"), None);
        assert_eq!(parse_system("cpu 1 x 3 4\n"), None);
    }

    #[test]
    fn parses_a_process_whose_name_holds_spaces_and_parentheses() {
        let stat = "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 731 52 0 0 20 0 3 0";
        assert_eq!(parse_process(stat), Some(731 + 52));
        assert_eq!(parse_process("4242 (x) S 1 2"), None);
    }

    #[test]
    fn shares_subtract_the_bench_own_time() {
        let a = SystemTicks {
            busy: 1000,
            total: 5000,
            steal: 10,
        };
        let b = SystemTicks {
            busy: 1000 + 300,
            total: 5000 + 400,
            steal: 10 + 20,
        };
        let load = shares("Pad", a, b, 240).unwrap();
        assert_eq!(load.other_processes_share, 60.0 / 400.0);
        assert_eq!(load.steal_share, 20.0 / 400.0);
        // The bench's own count may run a tick ahead of the system's.
        assert_eq!(shares("Pad", a, b, 400).unwrap().other_processes_share, 0.0);
        // Too short a section to tell.
        let short = SystemTicks {
            total: 5000 + 99,
            ..b
        };
        assert_eq!(shares("Pad", a, short, 0), None);
    }
}
