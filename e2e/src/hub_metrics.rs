//! Reads the hub's Prometheus `/metrics` the way a monitoring system would,
//! so tests count what the hub did (messages sent, reports written) without
//! reaching into its memory.

use std::net::SocketAddr;

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

/// The sum of every sample of metric `name` (over all label sets) in a
/// Prometheus text exposition; 0 when there is none.
pub fn sum_of(exposition: &str, name: &str) -> f64 {
    exposition
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let metric = series.split('{').next()?;
            (metric == name).then(|| value.parse::<f64>().ok())?
        })
        .sum()
}

/// Scrapes `http://{addr}/metrics` and returns metric `name` summed over labels.
pub async fn hub_metric(addr: SocketAddr, name: &str) -> Result<f64, ScrapeError> {
    Ok(sum_of(&scrape(addr).await?, name))
}

/// Scrapes `http://{addr}/metrics` and returns the whole text exposition.
pub async fn scrape(addr: SocketAddr) -> Result<String, ScrapeError> {
    let url = format!("http://{addr}/metrics");
    let failed = |message: String| ScrapeError::Request {
        url: url.clone(),
        message,
    };
    let uri: http::Uri = url
        .parse()
        .map_err(|e: http::uri::InvalidUri| failed(e.to_string()))?;
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let response = client.get(uri).await.map_err(|e| failed(e.to_string()))?;
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| failed(e.to_string()))?
        .to_bytes();
    Ok(String::from_utf8_lossy(&body).into_owned())
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
}
