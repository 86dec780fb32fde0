//! Figures of a scale run: latency percentiles from an hdrhistogram, and the
//! one table `ferry-scale` prints.

use std::fmt::Write as _;
use std::time::Duration;

use hdrhistogram::Histogram;

/// Latency percentiles of one measure, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Percentiles {
    /// How many samples.
    pub count: u64,
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Largest sample.
    pub max_ms: f64,
}

/// Records latencies (microsecond resolution, up to an hour).
#[derive(Debug)]
pub struct Latencies(Histogram<u64>);

impl Default for Latencies {
    fn default() -> Self {
        Self::new()
    }
}

impl Latencies {
    /// An empty recorder.
    pub fn new() -> Self {
        // 1 µs to 1 h with 3 significant digits; the bounds are constants
        // hdrhistogram accepts, so this cannot fail.
        Self(Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds"))
    }

    /// Adds one sample; samples beyond an hour count as an hour.
    pub fn record(&mut self, latency: Duration) {
        let micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.0.saturating_record(micros.max(1));
    }

    /// The percentiles of what was recorded (all zero when nothing was).
    pub fn percentiles(&self) -> Percentiles {
        if self.0.is_empty() {
            return Percentiles::default();
        }
        let ms = |micros: u64| micros as f64 / 1000.0;
        Percentiles {
            count: self.0.len(),
            p50_ms: ms(self.0.value_at_quantile(0.50)),
            p90_ms: ms(self.0.value_at_quantile(0.90)),
            p99_ms: ms(self.0.value_at_quantile(0.99)),
            max_ms: ms(self.0.max()),
        }
    }
}

impl Percentiles {
    /// `p50/p90/p99/max` in milliseconds, or `-` without samples.
    pub fn cell(&self) -> String {
        if self.count == 0 {
            return "-".into();
        }
        format!(
            "{:.0}/{:.0}/{:.0}/{:.0} ms",
            self.p50_ms, self.p90_ms, self.p99_ms, self.max_ms
        )
    }
}

/// One row of the table: one scenario at one fleet size.
#[derive(Debug, Clone, Default)]
pub struct Row {
    /// Scenario (P2, P3, P6, P9).
    pub scenario: String,
    /// Clusters connected.
    pub clusters: usize,
    /// Works on the hub during the scenario.
    pub works: usize,
    /// Hub RSS at the end of the scenario, KiB.
    pub hub_rss_kib: u64,
    /// Hub CPU seconds (user + system) spent during the scenario.
    pub hub_cpu_seconds: f64,
    /// Wall time of the scenario.
    pub wall: Duration,
    /// First latency measure (see the scenario's notes).
    pub latency_a: Percentiles,
    /// Second latency measure.
    pub latency_b: Percentiles,
    /// Bytes the hub sent to agents during the scenario.
    pub bytes_sent: u64,
    /// Status writes per second reaching the hub API server.
    pub status_writes_per_second: f64,
    /// What limited the scenario, with the figure that shows it.
    pub bottleneck: String,
}

/// Bytes as `12.3 KiB` / `4.5 MiB`.
pub fn human_bytes(bytes: u64) -> String {
    let b = bytes as f64;
    if b >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", b / 1024.0 / 1024.0)
    } else if b >= 1024.0 {
        format!("{:.1} KiB", b / 1024.0)
    } else {
        format!("{bytes} B")
    }
}

/// `part` as a percentage of `whole` (0 when `whole` is 0).
pub fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// The table of `rows`, in Markdown so it pastes into the README.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    out.push_str(
        "| scenario | clusters | works | hub RSS | hub CPU | wall | latency a p50/p90/p99/max | latency b p50/p90/p99/max | bytes sent | status writes/s | first bottleneck |\n",
    );
    out.push_str("|---|---|---|---|---|---|---|---|---|---|---|\n");
    for row in rows {
        let writes = if row.status_writes_per_second > 0.0 {
            format!("{:.0}", row.status_writes_per_second)
        } else {
            "-".into()
        };
        // Writing to a String cannot fail.
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {:.1} s | {:.1} s | {} | {} | {} | {} | {} |",
            row.scenario,
            row.clusters,
            row.works,
            human_bytes(row.hub_rss_kib * 1024),
            row.hub_cpu_seconds,
            row.wall.as_secs_f64(),
            row.latency_a.cell(),
            row.latency_b.cell(),
            human_bytes(row.bytes_sent),
            writes,
            row.bottleneck,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_come_from_the_recorded_samples() {
        let mut latencies = Latencies::new();
        for ms in 1..=100 {
            latencies.record(Duration::from_millis(ms));
        }
        let p = latencies.percentiles();
        assert_eq!(p.count, 100);
        assert!((p.p50_ms - 50.0).abs() < 0.1, "{p:?}");
        assert!((p.p99_ms - 99.0).abs() < 0.1, "{p:?}");
        assert!((p.max_ms - 100.0).abs() < 0.1, "{p:?}");
        assert_eq!(p.cell(), "50/90/99/100 ms");
    }

    #[test]
    fn no_samples_print_a_dash() {
        assert_eq!(Latencies::new().percentiles().cell(), "-");
    }

    #[test]
    fn bytes_and_percentages_read_as_people_write_them() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(2048), "2.0 KiB");
        assert_eq!(human_bytes(3 * 1024 * 1024), "3.0 MiB");
        assert_eq!(percent(5, 100), 5.0);
        assert_eq!(percent(1, 0), 0.0);
    }

    #[test]
    fn the_table_has_a_header_and_one_line_per_row() {
        let rows = vec![Row {
            scenario: "P3".into(),
            clusters: 100,
            hub_rss_kib: 2048,
            bottleneck: "none".into(),
            ..Default::default()
        }];
        let text = table(&rows);
        assert_eq!(text.lines().count(), 3);
        assert!(text.contains("| P3 | 100 | 0 | 2.0 MiB |"), "{text}");
    }
}
