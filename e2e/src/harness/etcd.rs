//! Talking to a control plane's etcd directly, through the JSON gateway its
//! client port serves, for what the Kubernetes API cannot do: compacting
//! the history so that a watch from an old resource version fails with 410.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

/// An etcd request failed.
#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    /// The request could not be made or its answer read.
    #[error("POST {url}: {message}")]
    Request {
        /// The URL.
        url: String,
        /// What went wrong.
        message: String,
    },
    /// etcd answered with an error status.
    #[error("POST {url}: HTTP {status}: {body}")]
    Refused {
        /// The URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// What etcd said.
        body: String,
    },
    /// The answer carried no revision.
    #[error("POST {url}: no header.revision in {body}")]
    NoRevision {
        /// The URL.
        url: String,
        /// What etcd said.
        body: String,
    },
}

async fn post(port: u16, path: &str, body: Value) -> Result<Value, EtcdError> {
    let url = format!("http://127.0.0.1:{port}{path}");
    let failed = |message: String| EtcdError::Request {
        url: url.clone(),
        message,
    };
    let request = http::Request::post(&url)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .map_err(|e| failed(e.to_string()))?;
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    let response = client
        .request(request)
        .await
        .map_err(|e| failed(e.to_string()))?;
    let status = response.status().as_u16();
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(|e| failed(e.to_string()))?
        .to_bytes();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    if status != 200 {
        return Err(EtcdError::Refused {
            url,
            status,
            body: text,
        });
    }
    serde_json::from_str(&text).map_err(|e| failed(format!("{e}: {text}")))
}

/// Compacts the history of the etcd whose client port is `port` up to its
/// current revision, physically (it returns once the old revisions are
/// gone); returns that revision. A watch from an older resource version
/// then fails with 410 Gone, unless an API server's watch cache still
/// holds the events (start the control plane without one). Fails when
/// etcd cannot be reached or refuses.
pub async fn compact_to_current(port: u16) -> Result<i64, EtcdError> {
    // Any range answers with the store's current revision in its header.
    let path = "/v3/kv/range";
    let answer = post(port, path, json!({"key": "Lw==", "count_only": true})).await?;
    let revision = answer["header"]["revision"]
        .as_str()
        .and_then(|r| r.parse::<i64>().ok())
        .or_else(|| answer["header"]["revision"].as_i64())
        .ok_or_else(|| EtcdError::NoRevision {
            url: format!("http://127.0.0.1:{port}{path}"),
            body: answer.to_string(),
        })?;
    post(
        port,
        "/v3/kv/compaction",
        json!({"revision": revision.to_string(), "physical": true}),
    )
    .await?;
    Ok(revision)
}

/// Every key and value etcd (client port `port`) holds now, values as
/// stored (the API server's protobuf or JSON), for tests that must prove
/// something is stored nowhere. Fails when etcd cannot be reached or its
/// answer does not decode.
pub async fn all_values(port: u16) -> Result<Vec<(String, Vec<u8>)>, EtcdError> {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    let path = "/v3/kv/range";
    // From the smallest key to the end of the keyspace ("\0" as range_end).
    let answer = post(port, path, json!({"key": "AA==", "range_end": "AA=="})).await?;
    let undecodable = |what: &str| EtcdError::Request {
        url: format!("http://127.0.0.1:{port}{path}"),
        message: format!("{what} is not base64"),
    };
    answer["kvs"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|kv| {
            let key = STANDARD
                .decode(kv["key"].as_str().unwrap_or_default())
                .map_err(|_| undecodable("a key"))?;
            let value = STANDARD
                .decode(kv["value"].as_str().unwrap_or_default())
                .map_err(|_| undecodable("a value"))?;
            Ok((String::from_utf8_lossy(&key).into_owned(), value))
        })
        .collect()
}
