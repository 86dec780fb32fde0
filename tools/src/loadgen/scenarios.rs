//! The scale scenarios run against a real hub process: P3 (idle clusters),
//! P2 (one change in each of many clusters), P6 (hub restart) and P9
//! (sustained status throughput). Each returns one table row.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};

use ferry_api::manifest_work::ManifestWork;

use crate::loadgen::hub_watch::AppliedWatch;
use crate::loadgen::report::{Latencies, Row, percent};
use crate::loadgen::run::SimFleet;
use crate::proc_stats::{cpu_seconds, rss_kib};
use ferry_e2e::harness::hub_metrics::{hub_metric, scrape, sum_of};
use ferry_e2e::harness::hub_process::HubProcess;
use ferry_e2e::helpers::work_helpers::{config_map, manifest_work};

/// A scenario could not run to its end.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The hub API server refused a write.
    #[error("writing work {work}: {source}")]
    Write {
        /// `namespace/name`.
        work: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
    /// Something did not happen in time.
    #[error("{0}")]
    Timeout(String),
    /// The hub process could not be measured or restarted.
    #[error("hub process: {0}")]
    Hub(String),
}

/// What the scenarios need: the hub process, its API server, the agents.
pub struct Bench<'a> {
    /// The hub replicas' processes (at least one); with several they
    /// elect a leader and agents are spread over them.
    pub hubs: &'a mut [HubProcess],
    /// Admin client of the hub API server.
    pub admin: Client,
    /// The simulated agents.
    pub fleet: &'a SimFleet,
    /// Names of the simulated clusters, in order.
    pub clusters: &'a [String],
    /// Writes to the hub API server in flight at once.
    pub write_concurrency: usize,
    /// Clock ticks per second of `/proc/<pid>/stat`.
    pub ticks_per_second: f64,
    /// Longest any wait in a scenario lasts.
    pub timeout: Duration,
}

/// The RSS (KiB) and CPU seconds of the hub replicas `hubs` now, summed
/// (`ticks_per_second` from the kernel); fails when one is not running or
/// its `/proc` entry cannot be read.
pub fn hubs_usage(hubs: &[HubProcess], ticks_per_second: f64) -> Result<(u64, f64), ScenarioError> {
    let mut total = (0, 0.0);
    for hub in hubs {
        let pid = hub
            .pid()
            .ok_or_else(|| ScenarioError::Hub("a hub replica is not running".into()))?;
        total.0 += rss_kib(pid).map_err(|e| ScenarioError::Hub(e.to_string()))?;
        total.1 +=
            cpu_seconds(pid, ticks_per_second).map_err(|e| ScenarioError::Hub(e.to_string()))?;
    }
    Ok(total)
}

fn hub_usage(bench: &Bench<'_>) -> Result<(u64, f64), ScenarioError> {
    hubs_usage(bench.hubs, bench.ticks_per_second)
}

/// A counter or gauge of the hub, summed over its replicas (0 where a
/// replica does not answer).
async fn hubs_metric(bench: &Bench<'_>, name: &str) -> f64 {
    let mut total = 0.0;
    for hub in bench.hubs.iter() {
        total += hub_metric(hub.probes(), name).await.unwrap_or_default();
    }
    total
}

/// A work holding one ConfigMap whose data says `value`.
fn work(cluster: &str, name: &str, value: &str) -> ManifestWork {
    manifest_work(
        cluster,
        name,
        vec![config_map(
            "default",
            name,
            serde_json::json!({"value": value}),
        )],
    )
}

/// Creates work `name` in each of `clusters`, `concurrency` at a time.
pub async fn create_works(
    admin: &Client,
    clusters: &[String],
    names: &[String],
    concurrency: usize,
) -> Result<(), ScenarioError> {
    let pairs: Vec<(&String, &String)> = clusters
        .iter()
        .flat_map(|c| names.iter().map(move |n| (c, n)))
        .collect();
    futures::stream::iter(pairs)
        .map(|(cluster, name)| async move {
            let api: Api<ManifestWork> = Api::namespaced(admin.clone(), cluster);
            match api
                .create(&PostParams::default(), &work(cluster, name, "v1"))
                .await
            {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
                Err(source) => Err(ScenarioError::Write {
                    work: format!("{cluster}/{name}"),
                    source,
                }),
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// The hub API server's LISTs of ManagedClusters so far and the bytes it
/// answered them with (its own `apiserver_request_total` and
/// `apiserver_response_sizes`): a read every idle cluster costs the API
/// server when something lists the whole fleet periodically.
async fn cluster_lists(admin: &Client) -> (f64, f64) {
    let text = apiserver_metrics(admin).await;
    let wanted = "resource=\"managedclusters\",scope=\"cluster\",subresource=\"\",verb=\"LIST\"";
    (
        sum_of_prefix(&text, &format!("apiserver_request_total{{{wanted}")),
        sum_of_prefix(&text, &format!("apiserver_response_sizes_sum{{{wanted}")),
    )
}

/// The hub API server's write requests (POST, PUT, PATCH, DELETE) so far,
/// from its own request counters: in all, to ManagedClusters, to Leases,
/// and TokenReviews (a POST each, stored nowhere).
async fn api_writes(admin: &Client) -> (f64, f64, f64, f64) {
    let text = apiserver_metrics(admin).await;
    let mut all = 0.0;
    let mut clusters = 0.0;
    let mut leases = 0.0;
    let mut reviews = 0.0;
    for verb in ["POST", "PUT", "PATCH", "DELETE"] {
        let verb = format!("verb=\"{verb}\"");
        all += sum_of_prefix(&text, &format!("apiserver_request_total{{{verb}"));
        clusters += sum_of_prefix(
            &text,
            &format!("apiserver_request_total{{resource=\"managedclusters\",{verb}"),
        );
        leases += sum_of_prefix(
            &text,
            &format!("apiserver_request_total{{resource=\"leases\",{verb}"),
        );
        reviews += sum_of_prefix(
            &text,
            &format!("apiserver_request_total{{resource=\"tokenreviews\",{verb}"),
        );
    }
    (all, clusters, leases, reviews)
}

/// P3: the clusters connected and idle. `baseline_kib` is the hub's RSS
/// before any agent connected, `connect` how long connecting them took;
/// the hub API server's writes are counted over `window` of idleness (its
/// own `apiserver_request_total`, so every writer counts, the hub's
/// liveness, Leases and the control plane's own alike).
pub async fn p3_idle(
    bench: &Bench<'_>,
    baseline_kib: u64,
    cpu_before: f64,
    connect: Duration,
    window: Duration,
) -> Result<Row, ScenarioError> {
    let before = api_writes(&bench.admin).await;
    let hub_before = hub_api_requests(bench.hubs).await;
    let lists_before = cluster_lists(&bench.admin).await;
    let (_, idle_cpu_before) = hub_usage(bench)?;
    let started = Instant::now();
    tokio::time::sleep(window).await;
    let after = api_writes(&bench.admin).await;
    let hub_after = hub_api_requests(bench.hubs).await;
    let lists_after = cluster_lists(&bench.admin).await;
    let secs = started.elapsed().as_secs_f64().max(1e-3);
    let rate = |a: f64, b: f64| (b - a).max(0.0) / secs;
    let (rss, cpu) = hub_usage(bench)?;
    let clusters = bench.fleet.size();
    let per_cluster = rss.saturating_sub(baseline_kib) as f64 / clusters.max(1) as f64;
    Ok(Row {
        scenario: "P3 idle".into(),
        clusters,
        works: 0,
        hub_rss_kib: rss,
        hub_cpu_seconds: cpu - cpu_before,
        wall: connect,
        bottleneck: format!(
            "{per_cluster:.1} KiB/idle cluster (RSS {} -> {} MiB); connect {:.1} s; idle, the hub's own API requests: {} per second (its ferry_hub_api_requests_total); the hub API server's writes from every client {:.2}/s over {:.0} s ({:.2}/s to ManagedClusters, {:.2}/s to Leases, {:.2}/s TokenReviews); idle ManagedCluster LISTs {:.2}/s answering {:.1} KiB/s; idle hub CPU {:.3} cores",
            baseline_kib / 1024,
            rss / 1024,
            connect.as_secs_f64(),
            requests_per_second(&hub_before, &hub_after, secs),
            rate(before.0, after.0),
            secs,
            rate(before.1, after.1),
            rate(before.2, after.2),
            rate(before.3, after.3),
            rate(lists_before.0, lists_after.0),
            rate(lists_before.1, lists_after.1) / 1024.0,
            (cpu - idle_cpu_before).max(0.0) / secs,
        ),
        ..Default::default()
    })
}

/// P2: work `p2` exists in each of `clusters` (applied); one change to each,
/// measured from its write to (a) its agent receiving it and (b) the hub
/// showing it Applied at the new generation.
pub async fn p2_fan_out(bench: &Bench<'_>, clusters: &[String]) -> Result<Row, ScenarioError> {
    const NAME: &str = "p2";
    create_works(
        &bench.admin,
        clusters,
        &[NAME.to_string()],
        bench.write_concurrency,
    )
    .await?;
    let watch = AppliedWatch::start(bench.admin.clone());
    // Every cluster's work applied at generation 1 before the change.
    wait_all(bench, clusters, NAME, 1, &watch).await?;
    let (_, cpu_before) = hub_usage(bench)?;
    let sent_before = bench.fleet.snapshot();
    let start = Instant::now();
    let written: Vec<(String, Instant, i64)> = futures::stream::iter(clusters.iter())
        .map(|cluster| async move {
            let api: Api<ManifestWork> = Api::namespaced(bench.admin.clone(), cluster);
            let at = Instant::now();
            let patch = serde_json::json!({"spec": {"workload": {"manifests": [
                config_map("default", NAME, serde_json::json!({"value": "v2"}))
            ]}}});
            let stored = api
                .patch(NAME, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(|source| ScenarioError::Write {
                    work: format!("{cluster}/{NAME}"),
                    source,
                })?;
            Ok::<_, ScenarioError>((cluster.clone(), at, stored.metadata.generation.unwrap_or(2)))
        })
        .buffer_unordered(bench.write_concurrency.max(1))
        .try_collect()
        .await?;
    let writes_done = start.elapsed();
    let mut received = Latencies::new();
    let mut applied = Latencies::new();
    for (cluster, at, generation) in &written {
        let deadline = start + bench.timeout;
        let (got, shown) = loop {
            let got = bench
                .fleet
                .arrivals()
                .arrived(cluster, NAME, *generation)
                .await;
            let shown = watch.applied(cluster, NAME, *generation).await;
            if let (Some(got), Some(shown)) = (got, shown) {
                break (got, shown);
            }
            if Instant::now() > deadline {
                return Err(ScenarioError::Timeout(format!(
                    "P2: work {cluster}/{NAME} generation {generation}: received {}, applied on the hub {}",
                    got.is_some(),
                    shown.is_some()
                )));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        received.record(got.saturating_duration_since(*at));
        applied.record(shown.saturating_duration_since(*at));
    }
    let wall = start.elapsed();
    let (rss, cpu) = hub_usage(bench)?;
    let sent = bench.fleet.snapshot().since(&sent_before);
    let write_rate = clusters.len() as f64 / writes_done.as_secs_f64().max(1e-3);
    Ok(Row {
        scenario: "P2 fan-out".into(),
        clusters: clusters.len(),
        works: clusters.len(),
        hub_rss_kib: rss,
        hub_cpu_seconds: cpu - cpu_before,
        wall,
        latency_a: received.percentiles(),
        latency_b: applied.percentiles(),
        bytes_sent: sent.bytes_received,
        status_writes_per_second: 0.0,
        bottleneck: format!(
            "hub API server writes: {} patches took {:.1} s ({write_rate:.0}/s at {} in flight)",
            clusters.len(),
            writes_done.as_secs_f64(),
            bench.write_concurrency
        ),
    })
}

/// Waits until work `name` of every one of `clusters` reached its agent and
/// shows Applied on the hub at `generation` or later.
async fn wait_all(
    bench: &Bench<'_>,
    clusters: &[String],
    name: &str,
    generation: i64,
    watch: &AppliedWatch,
) -> Result<(), ScenarioError> {
    let deadline = Instant::now() + bench.timeout;
    for cluster in clusters {
        loop {
            let got = bench
                .fleet
                .arrivals()
                .arrived(cluster, name, generation)
                .await;
            let shown = watch.applied(cluster, name, generation).await;
            if got.is_some() && shown.is_some() {
                break;
            }
            if Instant::now() > deadline {
                return Err(ScenarioError::Timeout(format!(
                    "work {cluster}/{name} not applied at generation {generation} within {:?}",
                    bench.timeout
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(())
}

/// P6: `works_per_cluster` works in each of `clusters`; the hub is killed
/// and started again. Measures until every agent holds a session again,
/// and the bytes the hub sent after the restart against the full state.
pub async fn p6_restart(
    bench: &mut Bench<'_>,
    clusters: &[String],
    works_per_cluster: usize,
) -> Result<Row, ScenarioError> {
    let names: Vec<String> = (0..works_per_cluster).map(|i| format!("p6-{i}")).collect();
    let before_create = bench.fleet.snapshot();
    create_works(&bench.admin, clusters, &names, bench.write_concurrency).await?;
    let expected = (clusters.len() * names.len()) as u64;
    bench
        .fleet
        .wait_for(bench.timeout, |s| {
            s.since(&before_create).upserts >= expected
        })
        .await
        .map_err(|s| {
            ScenarioError::Timeout(format!(
                "P6: {} of {expected} works reached their agents",
                s.since(&before_create).upserts
            ))
        })?;
    let all = bench.fleet.size() as u64;
    let before = bench.fleet.snapshot();
    for hub in bench.hubs.iter_mut() {
        hub.kill().await;
    }
    // Agents see the connection drop; wait until none holds a session.
    bench
        .fleet
        .wait_for(bench.timeout, |s| s.connected == 0)
        .await
        .map_err(|s| {
            ScenarioError::Timeout(format!(
                "P6: {} agents still connected to a killed hub",
                s.connected
            ))
        })?;
    let requests_before = api_requests(&bench.admin).await;
    let start = Instant::now();
    for hub in bench.hubs.iter_mut() {
        hub.restart()
            .map_err(|e| ScenarioError::Hub(e.to_string()))?;
    }
    // A fresh process: all its CPU time is the restart's.
    let cpu_before = 0.0;
    // Where the storm stands every 2 s: the shape of its curve (the hub's
    // start, then its connect rate) says what bounds it.
    let served = bench
        .fleet
        .wait_for_reporting(
            bench.timeout,
            Duration::from_secs(2),
            |s, elapsed| {
                format!(
                    "P6 after {:.0} s: {} of {all} served, {} dialing, {} waiting for the hub's response, {} for its Welcome; {} redials failed",
                    elapsed.as_secs_f64(),
                    s.connected,
                    s.dialing,
                    s.awaiting_response,
                    s.awaiting_welcome,
                    s.since(&before).session_errors
                )
            },
            |s| s.connected >= all && s.since(&before).welcomes >= all,
        )
        .await
        .map_err(|s| {
            ScenarioError::Timeout(format!("P6: {} of {all} agents served again", s.connected))
        })?;
    let storm = start.elapsed();
    let requests = requests_per_cluster(
        &requests_before,
        &api_requests(&bench.admin).await,
        bench.fleet.size(),
    );
    let (rss, cpu) = hub_usage(bench)?;
    let after = bench.fleet.snapshot().since(&before);
    let full = after.held_bytes;
    Ok(Row {
        scenario: "P6 restart".into(),
        clusters: bench.fleet.size(),
        works: clusters.len() * names.len(),
        hub_rss_kib: rss,
        hub_cpu_seconds: cpu - cpu_before,
        wall: served,
        bytes_sent: after.bytes_received,
        bottleneck: format!(
            "served again in {:.1} s; hub API requests per cluster until then: {requests}; resent {} upserts, {} B = {:.2} % of the full state ({} B); {} reconnect failures",
            storm.as_secs_f64(),
            after.upserts,
            after.bytes_received,
            percent(after.bytes_received, full),
            full,
            after.session_errors
        ),
        ..Default::default()
    })
}

/// P9: every agent sends changed status reports as fast as the hub takes
/// them for `duration`; counts the status writes reaching the hub API
/// server and names what limited them.
pub async fn p9_status(
    bench: &Bench<'_>,
    duration: Duration,
    cores: f64,
) -> Result<Row, ScenarioError> {
    let writes = "ferry_hub_status_writes_total";
    // One work per cluster to report on, each applied and written once
    // before the measure starts.
    let before_create = bench.fleet.snapshot();
    let writes_start = hubs_metric(bench, writes).await;
    create_works(
        &bench.admin,
        bench.clusters,
        &["p9".to_string()],
        bench.write_concurrency,
    )
    .await?;
    let wanted = bench.clusters.len() as u64;
    bench
        .fleet
        .wait_for(bench.timeout, |s| s.since(&before_create).upserts >= wanted)
        .await
        .map_err(|s| {
            ScenarioError::Timeout(format!(
                "P9: {} of {wanted} works reached their agents",
                s.since(&before_create).upserts
            ))
        })?;
    let deadline = Instant::now() + bench.timeout;
    while hubs_metric(bench, writes).await < writes_start + wanted as f64 {
        if Instant::now() > deadline {
            return Err(ScenarioError::Timeout(
                "P9: the first statuses were not written".into(),
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let api_patches = "apiserver_request_total{resource=\"manifestworks\",subresource=\"status\"";
    let api_before = apiserver_metrics(&bench.admin).await;
    let writes_before = hubs_metric(bench, writes).await;
    let reports_before = hubs_metric(bench, "ferry_hub_status_reports_total").await;
    let (_, cpu_before) = hub_usage(bench)?;
    let sent_before = bench.fleet.snapshot();
    let own_before = cpu_seconds(std::process::id(), bench.ticks_per_second).unwrap_or_default();
    let start = Instant::now();
    bench.fleet.churn(true);
    tokio::time::sleep(duration).await;
    bench.fleet.churn(false);
    let wall = start.elapsed();
    let (rss, cpu) = hub_usage(bench)?;
    let own =
        cpu_seconds(std::process::id(), bench.ticks_per_second).unwrap_or_default() - own_before;
    let writes_after = hubs_metric(bench, writes).await;
    let reports_after = hubs_metric(bench, "ferry_hub_status_reports_total").await;
    let mut pending = 0.0;
    for hub in bench.hubs.iter() {
        let metrics = scrape(hub.probes()).await.unwrap_or_default();
        pending += sum_of(&metrics, "ferry_hub_status_reports_pending");
    }
    let api_after = apiserver_metrics(&bench.admin).await;
    let secs = wall.as_secs_f64();
    let sent = bench.fleet.snapshot().since(&sent_before).statuses_sent as f64 / secs;
    let reports = (reports_after - reports_before) / secs;
    let written = (writes_after - writes_before) / secs;
    let api_rate =
        (sum_of_prefix(&api_after, api_patches) - sum_of_prefix(&api_before, api_patches)) / secs;
    let hub_cpu = (cpu - cpu_before) / secs;
    let own_cpu = own / secs;
    let busiest = [("hub", hub_cpu), ("load generator", own_cpu)];
    let bottleneck = format!(
        "agents sent {sent:.0}/s, hub took {reports:.0} reports/s, wrote {written:.0}/s (API server counted {api_rate:.0} status PATCH/s), {pending} pending; CPU cores: hub {:.2}, load generator {:.2}, of {cores}; limit: {}",
        busiest[0].1,
        busiest[1].1,
        name_limit(written, reports, hub_cpu, own_cpu, cores),
    );
    Ok(Row {
        scenario: "P9 status".into(),
        clusters: bench.fleet.size(),
        works: 0,
        hub_rss_kib: rss,
        hub_cpu_seconds: cpu - cpu_before,
        wall,
        status_writes_per_second: written,
        bottleneck,
        ..Default::default()
    })
}

/// Names what limited the status write rate from what was measured: the
/// machine's cores when hub and load generator together use them up, the
/// hub's status writer when it takes reports much faster than it writes
/// them, else the hub API server (the writer's awaits are its answers).
pub fn name_limit(written: f64, reports: f64, hub_cpu: f64, own_cpu: f64, cores: f64) -> String {
    if hub_cpu + own_cpu >= 0.8 * cores {
        format!(
            "the machine's CPU ({:.2} of {cores} cores taken by hub + load generator alone, the API server and etcd share the rest)",
            hub_cpu + own_cpu
        )
    } else if reports > 2.0 * written.max(1.0) {
        "status writes: reports are coalesced per work while a write is in flight, so each write waits for the hub API server's answer (its PATCH latency)".into()
    } else {
        "the hub API server's PATCH latency".into()
    }
}

/// The hub API server's requests so far by (verb, resource[/subresource]),
/// from its own `apiserver_request_total` (every code summed), so every
/// client counts: the hub, its controllers, the bench's joins.
pub async fn api_requests(admin: &Client) -> BTreeMap<(String, String), f64> {
    requests_by_verb_and_resource(&apiserver_metrics(admin).await)
}

/// [`api_requests`] from an exposition text.
pub fn requests_by_verb_and_resource(exposition: &str) -> BTreeMap<(String, String), f64> {
    counts_by_verb_and_resource(exposition, "apiserver_request_total")
}

/// The hub replicas' own requests to their API server so far by (verb,
/// resource[/subresource]), from their `ferry_hub_api_requests_total`
/// summed over the replicas (a replica that does not answer counts 0):
/// the hub's requests alone, where [`api_requests`] counts every client.
pub async fn hub_api_requests(hubs: &[HubProcess]) -> BTreeMap<(String, String), f64> {
    let mut counts = BTreeMap::new();
    for hub in hubs {
        let text = scrape(hub.probes()).await.unwrap_or_default();
        for (key, value) in hub_requests_by_verb_and_resource(&text) {
            *counts.entry(key).or_insert(0.0) += value;
        }
    }
    counts
}

/// [`hub_api_requests`] of one replica from its exposition text.
pub fn hub_requests_by_verb_and_resource(exposition: &str) -> BTreeMap<(String, String), f64> {
    counts_by_verb_and_resource(exposition, "ferry_hub_api_requests_total")
}

/// The series of counter `metric` in `exposition` summed by their `verb`
/// and `resource` (with `/subresource` when one is set) labels.
fn counts_by_verb_and_resource(exposition: &str, metric: &str) -> BTreeMap<(String, String), f64> {
    let name = format!("{metric}{{");
    let mut counts = BTreeMap::new();
    for line in exposition.lines() {
        let Some(rest) = line.strip_prefix(name.as_str()) else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let Ok(value) = value.trim().parse::<f64>() else {
            continue;
        };
        let label = |name: &str| {
            labels
                .split(',')
                .filter_map(|pair| pair.split_once('='))
                .find(|(key, _)| *key == name)
                .map(|(_, v)| v.trim_matches('"').to_string())
                .unwrap_or_default()
        };
        let mut resource = label("resource");
        let subresource = label("subresource");
        if !subresource.is_empty() {
            resource = format!("{resource}/{subresource}");
        }
        *counts.entry((label("verb"), resource)).or_insert(0.0) += value;
    }
    counts
}

/// The requests between two [`api_requests`] snapshots per cluster (of
/// `clusters`), by verb and resource, largest first, those at least 0.01
/// per cluster, plus the total: `PATCH managedclusters 1.00, ...`.
pub fn requests_per_cluster(
    before: &BTreeMap<(String, String), f64>,
    after: &BTreeMap<(String, String), f64>,
    clusters: usize,
) -> String {
    requests_per(before, after, clusters.max(1) as f64)
}

/// The requests between two snapshots per second of `seconds`, written as
/// [`requests_per_cluster`] writes them.
pub fn requests_per_second(
    before: &BTreeMap<(String, String), f64>,
    after: &BTreeMap<(String, String), f64>,
    seconds: f64,
) -> String {
    requests_per(before, after, seconds.max(1e-3))
}

/// The requests between two snapshots divided by `divisor`, largest first,
/// those at least 0.01, after their total.
fn requests_per(
    before: &BTreeMap<(String, String), f64>,
    after: &BTreeMap<(String, String), f64>,
    divisor: f64,
) -> String {
    let mut rows: Vec<(f64, String)> = after
        .iter()
        .map(|(key, value)| {
            let was = before.get(key).copied().unwrap_or(0.0);
            (
                (value - was).max(0.0) / divisor,
                format!("{} {}", key.0, key.1),
            )
        })
        .filter(|(per, _)| *per >= 0.01)
        .collect();
    rows.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let total: f64 = rows.iter().map(|(per, _)| per).sum();
    let mut text = format!("{total:.2} in all");
    for (per, name) in rows {
        text.push_str(&format!(", {name} {per:.2}"));
    }
    text
}

/// Writes (POST, PUT, PATCH, DELETE) to ManagedClusters, with their status,
/// in an [`api_requests`] snapshot.
pub fn managed_cluster_writes(requests: &BTreeMap<(String, String), f64>) -> f64 {
    requests
        .iter()
        .filter(|((verb, resource), _)| {
            matches!(verb.as_str(), "POST" | "PUT" | "PATCH" | "DELETE")
                && resource.split('/').next() == Some("managedclusters")
        })
        .map(|(_, value)| value)
        .sum()
}

/// Waits until a `window` passes without a ManagedCluster write on the hub
/// API server (the connect storm's backlog is over: idle means no
/// per-cluster writes), at most `limit`; returns how long it waited and
/// whether it saw the quiet window.
pub async fn wait_backlog_drained(
    admin: &Client,
    window: Duration,
    limit: Duration,
) -> (Duration, bool) {
    let started = Instant::now();
    let mut last = managed_cluster_writes(&api_requests(admin).await);
    loop {
        if started.elapsed() + window > limit {
            return (started.elapsed(), false);
        }
        tokio::time::sleep(window).await;
        let now = managed_cluster_writes(&api_requests(admin).await);
        if now <= last {
            return (started.elapsed(), true);
        }
        last = now;
    }
}

/// The hub API server's own `/metrics` text (empty if it cannot be read).
async fn apiserver_metrics(admin: &Client) -> String {
    let request = http::Request::get("/metrics").body(Vec::new());
    match request {
        Ok(request) => admin.request_text(request).await.unwrap_or_default(),
        Err(_) => String::new(),
    }
}

/// The sum of the samples whose series starts with `prefix` (labels in any
/// order after the ones `prefix` holds are accepted).
fn sum_of_prefix(exposition: &str, prefix: &str) -> f64 {
    let (name, labels) = prefix.split_once('{').unwrap_or((prefix, ""));
    let wanted: Vec<&str> = labels.split(',').filter(|l| !l.is_empty()).collect();
    exposition
        .lines()
        .filter(|line| line.starts_with(name) && line[name.len()..].starts_with('{'))
        .filter(|line| wanted.iter().all(|w| line.contains(w)))
        .filter_map(|line| line.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apiserver_samples_are_summed_over_the_other_labels() {
        let text = "apiserver_request_total{code=\"200\",resource=\"manifestworks\",subresource=\"status\",verb=\"PATCH\"} 7\n\
                    apiserver_request_total{code=\"409\",resource=\"manifestworks\",subresource=\"status\",verb=\"PATCH\"} 2\n\
                    apiserver_request_total{code=\"200\",resource=\"manifestworks\",verb=\"GET\"} 5\n\
                    apiserver_request_total_other{resource=\"manifestworks\",subresource=\"status\"} 100\n";
        let prefix = "apiserver_request_total{resource=\"manifestworks\",subresource=\"status\"";
        assert_eq!(sum_of_prefix(text, prefix), 9.0);
    }

    #[test]
    fn requests_are_counted_by_verb_and_resource_per_cluster() {
        let before = requests_by_verb_and_resource(
            "apiserver_request_total{code=\"201\",component=\"apiserver\",resource=\"tokenreviews\",verb=\"POST\"} 10\n",
        );
        let after = requests_by_verb_and_resource(
            "apiserver_request_total{code=\"201\",component=\"apiserver\",resource=\"tokenreviews\",verb=\"POST\"} 30\n\
             apiserver_request_total{code=\"200\",resource=\"managedclusters\",subresource=\"status\",verb=\"PATCH\"} 8\n\
             apiserver_request_total{code=\"409\",resource=\"managedclusters\",subresource=\"status\",verb=\"PATCH\"} 2\n\
             apiserver_request_total{code=\"200\",resource=\"managedclusters\",verb=\"GET\"} 10\n\
             apiserver_request_total_other{resource=\"leases\",verb=\"PUT\"} 100\n",
        );
        assert_eq!(managed_cluster_writes(&after), 10.0);
        assert_eq!(
            requests_per_cluster(&before, &after, 10),
            "4.00 in all, POST tokenreviews 2.00, GET managedclusters 1.00, PATCH managedclusters/status 1.00"
        );
    }

    #[test]
    fn the_hubs_own_requests_are_read_from_its_counters_per_second() {
        let before = hub_requests_by_verb_and_resource(
            "# TYPE ferry_hub_api_requests counter\n\
             ferry_hub_api_requests_total{verb=\"PUT\",group=\"coordination.k8s.io\",resource=\"leases\",subresource=\"\"} 4\n",
        );
        let after = hub_requests_by_verb_and_resource(
            "ferry_hub_api_requests_total{verb=\"PUT\",group=\"coordination.k8s.io\",resource=\"leases\",subresource=\"\"} 7\n\
             ferry_hub_api_requests_total{verb=\"PATCH\",group=\"cluster.ferry.dev\",resource=\"managedclusters\",subresource=\"status\"} 30\n\
             ferry_hub_api_requests_total{verb=\"WATCH\",group=\"\",resource=\"secrets\",subresource=\"\"} 1\n\
             apiserver_request_total{resource=\"leases\",verb=\"PUT\"} 100\n",
        );
        assert_eq!(
            requests_per_second(&before, &after, 30.0),
            "1.13 in all, PATCH managedclusters/status 1.00, PUT leases 0.10, WATCH secrets 0.03"
        );
    }

    #[test]
    fn the_limit_named_follows_the_figures() {
        assert!(name_limit(500.0, 600.0, 1.0, 0.8, 2.0).contains("CPU"));
        assert!(name_limit(100.0, 900.0, 0.3, 0.3, 2.0).contains("coalesced"));
        assert!(name_limit(500.0, 600.0, 0.3, 0.3, 2.0).contains("API server"));
    }
}
