//! A process's resident memory and CPU time, read from `/proc` (Linux).

/// Reading `/proc/<pid>` failed (the process is gone, or not Linux).
#[derive(Debug, thiserror::Error)]
#[error("reading /proc/{pid}/{file}: {detail}")]
pub struct ProcError {
    /// The process.
    pub pid: u32,
    /// The file.
    pub file: &'static str,
    /// What went wrong.
    pub detail: String,
}

/// Resident set size (`VmRSS`) of `pid` in KiB.
pub fn rss_kib(pid: u32) -> Result<u64, ProcError> {
    let text = read(pid, "status")?;
    parse_vm_rss(&text).ok_or_else(|| ProcError {
        pid,
        file: "status",
        detail: "no VmRSS line".into(),
    })
}

/// CPU seconds (user + system) `pid` has used, at `ticks_per_second` clock
/// ticks (`getconf CLK_TCK`, 100 on Linux).
pub fn cpu_seconds(pid: u32, ticks_per_second: f64) -> Result<f64, ProcError> {
    let text = read(pid, "stat")?;
    parse_cpu_ticks(&text)
        .map(|ticks| ticks as f64 / ticks_per_second)
        .ok_or_else(|| ProcError {
            pid,
            file: "stat",
            detail: "no utime/stime fields".into(),
        })
}

fn read(pid: u32, file: &'static str) -> Result<String, ProcError> {
    std::fs::read_to_string(format!("/proc/{pid}/{file}")).map_err(|e| ProcError {
        pid,
        file,
        detail: e.to_string(),
    })
}

/// `VmRSS:   1234 kB` → 1234.
fn parse_vm_rss(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// utime + stime (fields 14 and 15) of a `/proc/<pid>/stat` line. The
/// command name (field 2) may hold spaces and parentheses, so fields are
/// counted after its last `)`.
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let after = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // After the name, field 3 (state) is index 0, so field n is index n - 3.
    let utime: u64 = fields.get(14 - 3)?.parse().ok()?;
    let stime: u64 = fields.get(15 - 3)?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vm_rss_is_read_in_kib() {
        let status = "Name:\tferry-hub\nVmPeak:\t  9000 kB\nVmRSS:\t   18432 kB\nThreads: 3\n";
        assert_eq!(parse_vm_rss(status), Some(18432));
        assert_eq!(parse_vm_rss("Name: x\n"), None);
    }

    #[test]
    fn cpu_ticks_are_counted_after_a_name_with_spaces() {
        let stat =
            "42 (ferry hub) S 1 42 42 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 3 0 100 1000 200";
        assert_eq!(parse_cpu_ticks(stat), Some(325));
    }

    #[test]
    fn this_process_has_memory_and_cpu() {
        let pid = std::process::id();
        assert!(rss_kib(pid).expect("rss") > 0);
        assert!(cpu_seconds(pid, 100.0).expect("cpu") >= 0.0);
    }
}
