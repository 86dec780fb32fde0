//! Reads a hub's or an agent's Prometheus `/metrics` (and other plain HTTP
//! endpoints such as `/readyz`) the way a monitoring system would, so tests
//! count what the hub or agent did (messages sent, reports written, applies)
//! without reaching into its memory.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

/// Scraping failed.
#[derive(Debug, thiserror::Error)]
pub enum ScrapeError {
    /// The request failed.
    #[error("GET {url}: {message}")]
    Request {
        /// The URL.
        url: String,
        /// What went wrong.
        message: String,
    },
}

/// The sum of every sample of `selector` in a Prometheus text exposition; 0
/// when there is none. `selector` is a metric name, summed over all its label
/// sets, optionally followed by labels the samples must carry:
/// `ferry_agent_applies_total{kind="v1/ConfigMap",outcome="created"}`.
pub fn sum_of(exposition: &str, selector: &str) -> f64 {
    let (name, wanted) = match selector.split_once('{') {
        Some((name, labels)) => (name, labels.trim_end_matches('}')),
        None => (selector, ""),
    };
    let wanted: Vec<&str> = wanted.split(',').filter(|l| !l.is_empty()).collect();
    exposition
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (metric, labels) = match series.split_once('{') {
                Some((metric, labels)) => (metric, labels.trim_end_matches('}')),
                None => (series, ""),
            };
            let carried: Vec<&str> = labels.split(',').collect();
            let matches = metric == name && wanted.iter().all(|w| carried.contains(w));
            matches.then(|| value.parse::<f64>().ok())?
        })
        .sum()
}

/// Scrapes `http://{addr}/metrics` and returns `selector` (see [`sum_of`]).
pub async fn hub_metric(addr: SocketAddr, selector: &str) -> Result<f64, ScrapeError> {
    Ok(sum_of(&scrape(addr).await?, selector))
}

/// Scrapes `http://{addr}/metrics` and returns the whole text exposition.
pub async fn scrape(addr: SocketAddr) -> Result<String, ScrapeError> {
    Ok(get(addr, "/metrics").await?.1)
}

/// GETs `http://{addr}{path}`: the status code and the body as text.
pub async fn get(addr: SocketAddr, path: &str) -> Result<(u16, String), ScrapeError> {
    let url = format!("http://{addr}{path}");
    let failed = |message: String| ScrapeError::Request {
        url: url.clone(),
        message,
    };
    let uri: http::Uri = url
        .parse()
        .map_err(|e: http::uri::InvalidUri| failed(e.to_string()))?;
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let response = client.get(uri).await.map_err(|e| failed(e.to_string()))?;
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| failed(e.to_string()))?
        .to_bytes();
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

/// Every status report the hub received from agents, whatever became of it
/// (summed over its `outcome` label).
pub const STATUS_REPORTS: &str = "ferry_hub_status_reports_total";

/// Every status report the hub received, counted on arrival before it is
/// written: once a report's status shows on the API server, it is counted.
pub const STATUS_REPORTS_RECEIVED: &str = "ferry_hub_status_reports_received_total";

/// Waits until `name` at `addr` (a hub's or an agent's; a [`sum_of`]
/// selector) exceeds `baseline`, scraping every 50 ms the way a monitoring
/// system would; the signal tests use to know the hub or agent saw something
/// happen (a report from a restarted agent, a message sent). Fails with the
/// last value on timeout.
pub async fn wait_metric_above(
    addr: SocketAddr,
    name: &str,
    baseline: f64,
    timeout: Duration,
) -> Result<f64, MetricWaitError> {
    wait_metric_where(addr, name, "more than", baseline, |v| v > baseline, timeout).await
}

/// Waits until `name` at `addr` (a [`sum_of`] selector) is at most
/// `ceiling`, scraping every 50 ms: the signal that a gauge came down (a
/// periodic sweep counted something as over). Fails with the last value on
/// timeout.
pub async fn wait_metric_at_most(
    addr: SocketAddr,
    name: &str,
    ceiling: f64,
    timeout: Duration,
) -> Result<f64, MetricWaitError> {
    wait_metric_where(addr, name, "at most", ceiling, |v| v <= ceiling, timeout).await
}

async fn wait_metric_where(
    addr: SocketAddr,
    name: &str,
    relation: &'static str,
    bound: f64,
    holds: impl Fn(f64) -> bool,
    timeout: Duration,
) -> Result<f64, MetricWaitError> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let value = hub_metric(addr, name).await?;
        if holds(value) {
            return Ok(value);
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(MetricWaitError::Timeout {
                name: name.to_string(),
                relation,
                bound,
                last: value,
                timeout,
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A hub metric did not move, or could not be read.
#[derive(Debug, thiserror::Error)]
pub enum MetricWaitError {
    /// Scraping failed.
    #[error(transparent)]
    Scrape(#[from] ScrapeError),
    /// The metric never reached the bound.
    #[error("{name} stayed at {last} (waiting for {relation} {bound}) for {timeout:?}")]
    Timeout {
        /// The metric.
        name: String,
        /// How it had to compare with `bound` ("more than", "at most").
        relation: &'static str,
        /// The value it had to reach.
        bound: f64,
        /// Its last value.
        last: f64,
        /// How long it was watched.
        timeout: Duration,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_every_label_set_of_the_named_metric_only() {
        let text = "# HELP x y\nferry_hub_status_reports_total{outcome=\"written\"} 3\nferry_hub_status_reports_total{outcome=\"stale\"} 2\nferry_hub_work_upserts_sent_total 7\n";
        assert_eq!(sum_of(text, "ferry_hub_status_reports_total"), 5.0);
        assert_eq!(sum_of(text, "ferry_hub_work_upserts_sent_total"), 7.0);
        assert_eq!(sum_of(text, "ferry_hub_work_upserts_sent"), 0.0);
    }

    #[test]
    fn a_selector_with_labels_sums_only_the_samples_carrying_them() {
        let text = "ferry_agent_applies_total{kind=\"v1/ConfigMap\",outcome=\"created\"} 2\nferry_agent_applies_total{kind=\"v1/ConfigMap\",outcome=\"updated\"} 1\nferry_agent_applies_total{kind=\"apps/v1/Deployment\",outcome=\"created\"} 4\n";
        assert_eq!(
            sum_of(text, "ferry_agent_applies_total{kind=\"v1/ConfigMap\"}"),
            3.0
        );
        assert_eq!(
            sum_of(
                text,
                "ferry_agent_applies_total{kind=\"v1/ConfigMap\",outcome=\"updated\"}"
            ),
            1.0
        );
        assert_eq!(
            sum_of(text, "ferry_agent_applies_total{outcome=\"created\"}"),
            6.0
        );
        assert_eq!(
            sum_of(text, "ferry_agent_applies_total{kind=\"v1/Secret\"}"),
            0.0
        );
    }
}
