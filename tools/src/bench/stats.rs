//! Percentiles and process memory for the benchmark tables.

use std::time::Duration;

use hdrhistogram::Histogram;

/// A histogram could not be built from the samples.
#[derive(Debug, thiserror::Error)]
pub enum StatsError {
    /// The bounds given to hdrhistogram were refused.
    #[error("histogram bounds: {0}")]
    Creation(#[from] hdrhistogram::CreationError),
    /// A sample did not fit the histogram.
    #[error("recording a sample: {0}")]
    Record(#[from] hdrhistogram::RecordError),
}

/// A histogram of `samples` in microseconds (3 significant digits), for
/// percentiles without sorting by hand. Fails only on hdrhistogram's bounds.
pub fn histogram(samples: &[Duration]) -> Result<Histogram<u64>, StatsError> {
    let mut histogram = Histogram::new(3)?;
    for sample in samples {
        let micros = u64::try_from(sample.as_micros()).unwrap_or(u64::MAX);
        histogram.record(micros.max(1))?;
    }
    Ok(histogram)
}

/// The `q` quantile of `histogram` in milliseconds; NaN when it is empty.
pub fn quantile_ms(histogram: &Histogram<u64>, q: f64) -> f64 {
    if histogram.is_empty() {
        return f64::NAN;
    }
    histogram.value_at_quantile(q) as f64 / 1000.0
}

/// Resident memory of process `pid` in KiB (VmRSS), 0 when it cannot be read
/// (the process is gone).
pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .unwrap_or_default()
}

/// Resident memory of process `pid` in MiB, rounded down.
pub fn rss_mib(pid: u32) -> u64 {
    rss_kib(pid) / 1024
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_come_from_the_samples_in_milliseconds() {
        let samples: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        let h = histogram(&samples).expect("histogram");
        assert!((quantile_ms(&h, 0.5) - 50.0).abs() < 0.1);
        assert!((quantile_ms(&h, 1.0) - 100.0).abs() < 0.1);
        assert!(quantile_ms(&histogram(&[]).expect("empty"), 0.5).is_nan());
    }

    #[test]
    fn the_own_process_has_a_resident_size() {
        assert!(rss_kib(std::process::id()) > 0);
    }
}
