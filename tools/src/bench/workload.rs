//! The side-by-side workload, run the same way against ferry and against
//! OCM's work agent: both serve a `ManifestWork` of the same shape, only its
//! API group differs. Every figure here is a wall-clock measurement on real
//! control planes.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::{StreamExt, TryStreamExt};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};

use super::progress::Progress;
use super::stats::{histogram, quantile_ms, rss_kib};

/// What the workload runs against.
pub struct Target {
    /// The system's name in the table.
    pub label: String,
    /// The ManifestWorks of the cluster, on the hub.
    pub works: Api<DynamicObject>,
    /// apiVersion of those works.
    pub api_version: String,
    /// Admin client of the hub API server.
    pub hub: Client,
    /// Admin client of the spoke API server.
    pub spoke: Client,
    /// The agent process, for its RSS.
    pub agent_pid: u32,
}

/// Sizes and bounds of the workload.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Works created one after another, then as many at once.
    pub works: usize,
    /// Objects edited on the spoke at once for the drift figure.
    pub drift_objects: usize,
    /// Longest wait for one drift correction.
    pub drift_bound: Duration,
    /// Deployment status changes timed for the feedback figure.
    pub feedback_samples: usize,
    /// Window over which steady-state writes are counted.
    pub steady_window: Duration,
    /// Longest wait for any one step.
    pub step_timeout: Duration,
}

/// The figures of one system.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    /// Sequential create -> Applied, ms: p50, p90, p99.
    pub create_ms: [f64; 3],
    /// Burst of creates: seconds until every create returned, and until
    /// every work was Applied.
    pub burst_create_s: (f64, f64),
    /// Burst of updates: seconds until every work showed its new generation Applied.
    pub burst_update_s: f64,
    /// Drift corrections, ms (p50, p99, max) of those within the bound, and
    /// how many were not corrected within it.
    pub drift_ms: [f64; 3],
    /// Drift edits not corrected within the bound.
    pub drift_over_bound: usize,
    /// Deployment status -> hub feedback, ms: p50, max.
    pub feedback_ms: [f64; 2],
    /// Write requests per minute at steady state on the spoke and the hub
    /// API servers (all clients, from apiserver_request_total).
    pub steady_writes_per_min: (f64, f64),
    /// Agent RSS in KiB with `works` works, and at the end (2 × works + 1).
    pub rss_kib: (u64, u64),
}

fn config_map(name: &str, value: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default"}, "data": {"i": value}})
}

impl Target {
    fn work(&self, name: &str, manifests: Vec<Value>, configs: Value) -> DynamicObject {
        let mut data = json!({"spec": {"workload": {"manifests": manifests}}});
        if !configs.is_null() {
            data["spec"]["manifestConfigs"] = configs;
        }
        let (group, version) = self
            .api_version
            .rsplit_once('/')
            .unwrap_or(("", &self.api_version));
        let resource =
            ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, "ManifestWork"));
        DynamicObject::new(name, &resource).data(data)
    }

    fn spoke_api(&self, api_version: &str, kind: &str) -> Api<DynamicObject> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
        Api::namespaced_with(self.spoke.clone(), "default", &resource)
    }
}

/// Runs the whole workload against `target` and returns its figures.
pub async fn run(target: &Target, load: &Workload) -> anyhow::Result<Figures> {
    let mut figures = Figures::default();
    let mut progress = Progress::start(target.works.clone()).await;
    let pp = PostParams::default();

    // 1. Works created one after another.
    let mut latencies = Vec::with_capacity(load.works);
    for i in 0..load.works {
        let name = format!("seq-{i}");
        let work = target.work(&name, vec![config_map(&name, &i.to_string())], Value::Null);
        let started = Instant::now();
        target.works.create(&pp, &work).await.context("create")?;
        let done = progress
            .wait_for(&HashMap::from([(name, 1)]), load.step_timeout)
            .await?;
        latencies.push(done - started);
    }
    let h = histogram(&latencies)?;
    figures.create_ms = [
        quantile_ms(&h, 0.5),
        quantile_ms(&h, 0.9),
        quantile_ms(&h, 0.99),
    ];
    figures.rss_kib.0 = rss_kib(target.agent_pid);
    println!(
        "{}: {} works one after another: p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms; agent RSS {} KiB",
        target.label,
        load.works,
        figures.create_ms[0],
        figures.create_ms[1],
        figures.create_ms[2],
        figures.rss_kib.0
    );

    // 2. As many created at once.
    let names: Vec<String> = (0..load.works).map(|i| format!("burst-{i}")).collect();
    let started = Instant::now();
    let creates = names.iter().map(|name| {
        let work = target.work(name, vec![config_map(name, "0")], Value::Null);
        let works = target.works.clone();
        let pp = pp.clone();
        async move { works.create(&pp, &work).await }
    });
    futures::future::try_join_all(creates)
        .await
        .context("burst create")?;
    let created = started.elapsed();
    let wanted: HashMap<String, i64> = names.iter().map(|n| (n.clone(), 1)).collect();
    let done = progress.wait_for(&wanted, load.step_timeout).await?;
    figures.burst_create_s = (created.as_secs_f64(), (done - started).as_secs_f64());
    println!(
        "{}: {} works created at once: creates {:.2} s, all Applied {:.2} s",
        target.label, load.works, figures.burst_create_s.0, figures.burst_create_s.1
    );

    // 3. Every one of them updated at once.
    let started = Instant::now();
    let updates = names.iter().map(|name| {
        let works = target.works.clone();
        let patch = json!({"spec": {"workload": {"manifests": [config_map(name, "1")]}}});
        async move {
            works
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(|w| (name.clone(), w.metadata.generation.unwrap_or(1)))
        }
    });
    let wanted: HashMap<String, i64> = futures::future::try_join_all(updates)
        .await
        .context("burst update")?
        .into_iter()
        .collect();
    let done = progress.wait_for(&wanted, load.step_timeout).await?;
    figures.burst_update_s = (done - started).as_secs_f64();
    println!(
        "{}: {} works updated at once: all Applied at the new generation {:.2} s",
        target.label, load.works, figures.burst_update_s
    );

    // 4. Drift: the first `drift_objects` sequential objects edited on the
    // spoke at once, each timed until put back (or the bound).
    let config_maps = target.spoke_api("v1", "ConfigMap");
    let edits = (0..load.drift_objects.min(load.works)).map(|i| {
        let api = config_maps.clone();
        let bound = load.drift_bound;
        async move {
            let name = format!("seq-{i}");
            let original = i.to_string();
            let mut changes = watcher(
                api.clone(),
                watcher::Config::default().fields(&format!("metadata.name={name}")),
            )
            .applied_objects()
            .boxed();
            // The first event is the object as it is now.
            changes.try_next().await.context("drift watch")?;
            let patch = json!({"data": {"i": "drift"}});
            let started = Instant::now();
            api.patch(
                &name,
                &PatchParams::apply("bench-drift").force(),
                &Patch::Apply(&json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name}, "data": patch["data"]})),
            )
            .await
            .context("drift the object")?;
            let corrected = async {
                while let Some(seen) = changes.try_next().await? {
                    if seen.data["data"]["i"] == original.as_str() {
                        return Ok::<_, anyhow::Error>(started.elapsed());
                    }
                }
                anyhow::bail!("drift watch ended")
            };
            match tokio::time::timeout(bound, corrected).await {
                Ok(result) => result.map(Some),
                Err(_) => Ok(None),
            }
        }
    });
    let drift = futures::future::try_join_all(edits).await?;
    figures.drift_over_bound = drift.iter().filter(|d| d.is_none()).count();
    let within: Vec<Duration> = drift.into_iter().flatten().collect();
    let h = histogram(&within)?;
    figures.drift_ms = [
        quantile_ms(&h, 0.5),
        quantile_ms(&h, 0.99),
        quantile_ms(&h, 1.0),
    ];
    println!(
        "{}: drift on {} objects: {} corrected within {:?} (p50 {:.1} ms, p99 {:.1} ms), {} not",
        target.label,
        load.drift_objects,
        within.len(),
        load.drift_bound,
        figures.drift_ms[0],
        figures.drift_ms[1],
        figures.drift_over_bound
    );

    // 5. Deployment status -> hub feedback. No controller runs on the
    // spoke: the bench writes the status a controller would.
    feedback(target, load, &mut progress, &mut figures).await?;

    // 6. Steady state: let what the steps started settle, then count writes.
    tokio::time::sleep(Duration::from_secs(15)).await;
    let spoke_before = write_requests(&target.spoke).await?;
    let hub_before = write_requests(&target.hub).await?;
    tokio::time::sleep(load.steady_window).await;
    let per_min =
        |after: f64, before: f64| (after - before) * 60.0 / load.steady_window.as_secs_f64();
    figures.steady_writes_per_min = (
        per_min(write_requests(&target.spoke).await?, spoke_before),
        per_min(write_requests(&target.hub).await?, hub_before),
    );
    figures.rss_kib.1 = rss_kib(target.agent_pid);
    println!(
        "{}: steady state writes/min spoke {:.1}, hub {:.1}; agent RSS {} KiB with {} works",
        target.label,
        figures.steady_writes_per_min.0,
        figures.steady_writes_per_min.1,
        figures.rss_kib.1,
        2 * load.works + 1
    );
    Ok(figures)
}

async fn feedback(
    target: &Target,
    load: &Workload,
    progress: &mut Progress,
    figures: &mut Figures,
) -> anyhow::Result<()> {
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}});
    let configs = json!([{"resourceIdentifier": {"group": "apps", "resource": "deployments",
            "namespace": "default", "name": "web"},
        "feedbackRules": [{"type": "JSONPaths", "jsonPaths": [{"name": "ready", "path": ".status.readyReplicas"}]}]}]);
    let work = target.work("feedback", vec![deployment], configs);
    target
        .works
        .create(&PostParams::default(), &work)
        .await
        .context("create the feedback work")?;
    progress
        .wait_for(
            &HashMap::from([("feedback".to_string(), 1)]),
            load.step_timeout,
        )
        .await?;
    let deployments = target.spoke_api("apps/v1", "Deployment");
    let mut hub_view = watcher(
        target.works.clone(),
        watcher::Config::default().fields("metadata.name=feedback"),
    )
    .applied_objects()
    .boxed();
    let mut samples = Vec::with_capacity(load.feedback_samples);
    for k in 1..=load.feedback_samples as i64 {
        let status = json!({"status": {"observedGeneration": 1, "replicas": 1000,
            "readyReplicas": k, "availableReplicas": k, "updatedReplicas": 3}});
        let started = Instant::now();
        deployments
            .patch_status("web", &PatchParams::default(), &Patch::Merge(&status))
            .await
            .context("write the Deployment status")?;
        let shown = async {
            while let Some(work) = hub_view.try_next().await? {
                if ready_feedback(&work) == Some(k) {
                    return Ok::<_, anyhow::Error>(started.elapsed());
                }
            }
            anyhow::bail!("feedback watch ended")
        };
        samples.push(
            tokio::time::timeout(load.step_timeout, shown)
                .await
                .context("no feedback within the step timeout")??,
        );
    }
    let h = histogram(&samples)?;
    figures.feedback_ms = [quantile_ms(&h, 0.5), quantile_ms(&h, 1.0)];
    println!(
        "{}: Deployment status -> hub feedback, {} changes: p50 {:.1} ms, max {:.1} ms",
        target.label, load.feedback_samples, figures.feedback_ms[0], figures.feedback_ms[1]
    );
    Ok(())
}

/// The `ready` feedback value of the first manifest of `work`.
fn ready_feedback(work: &DynamicObject) -> Option<i64> {
    work.data
        .pointer("/status/resourceStatus/manifests/0/statusFeedback/values")?
        .as_array()?
        .iter()
        .find(|v| v["name"] == "ready")?
        .pointer("/fieldValue/integer")?
        .as_i64()
}

/// Write requests (every verb but GET, LIST, WATCH) the API server behind
/// `client` has served, from `apiserver_request_total` on its /metrics.
pub async fn write_requests(client: &Client) -> anyhow::Result<f64> {
    let request = http::Request::get("/metrics")
        .body(Vec::new())
        .context("metrics request")?;
    let text = client
        .request_text(request)
        .await
        .context("reading /metrics")?;
    Ok(sum_writes(&text))
}

fn sum_writes(exposition: &str) -> f64 {
    exposition
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
        .filter(|l| {
            !["\"GET\"", "\"LIST\"", "\"WATCH\"", "\"CONNECT\""]
                .iter()
                .any(|v| l.contains(&format!("verb={v}")))
        })
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_write_verbs_are_counted() {
        let text = "apiserver_request_total{code=\"200\",verb=\"GET\"} 10\n\
                    apiserver_request_total{code=\"200\",verb=\"PUT\"} 3\n\
                    apiserver_request_total{code=\"201\",verb=\"POST\"} 2\n\
                    apiserver_request_total{code=\"0\",verb=\"WATCH\"} 7\n\
                    apiserver_request_duration_seconds_count{verb=\"PUT\"} 9\n";
        assert_eq!(sum_writes(text), 5.0);
    }

    #[test]
    fn feedback_is_read_from_the_first_manifest() {
        let work: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "work.ferry.dev/v1alpha1", "kind": "ManifestWork",
            "metadata": {"name": "feedback"},
            "status": {"resourceStatus": {"manifests": [{"statusFeedback": {"values": [
                {"name": "ready", "fieldValue": {"type": "Integer", "integer": 2}}]}}]}}
        }))
        .expect("work");
        assert_eq!(ready_feedback(&work), Some(2));
    }
}
