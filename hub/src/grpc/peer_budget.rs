//! How many unknown tokens one network peer may make the hub review. Every
//! token the hub does not already know to be good costs its peer one cell of
//! a token bucket (governor); a peer whose bucket is empty is refused without
//! a TokenReview, so a flood of junk tokens from one address cannot turn into
//! a flood of TokenReviews against the hub's API server. Buckets live in a
//! bounded moka cache and are dropped when their peer goes quiet.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, Quota};
use moka::future::Cache;

/// Peers tracked at once; a cache over this forgets the least used first.
const MAX_PEERS: u64 = 10_000;
/// A peer unheard of for this long starts again with a full bucket.
const PEER_IDLE: Duration = Duration::from_secs(600);

/// The budget of each peer, keyed by its address (IPv6 peers by their /64,
/// which one host can fill with addresses at will).
#[derive(Clone)]
pub struct PeerBudget {
    quota: Quota,
    peers: Cache<IpAddr, Arc<DefaultDirectRateLimiter>>,
}

impl PeerBudget {
    /// Allows each peer `per_minute` unknown tokens a minute, and as many at
    /// once.
    pub fn per_minute(per_minute: NonZeroU32) -> Self {
        Self {
            quota: Quota::per_minute(per_minute),
            peers: Cache::builder()
                .max_capacity(MAX_PEERS)
                .time_to_idle(PEER_IDLE)
                .build(),
        }
    }

    /// Takes one cell from `peer`'s bucket; false when it is empty. A request
    /// without a peer address (not over TCP) is never limited.
    pub async fn take(&self, peer: Option<IpAddr>) -> bool {
        let Some(peer) = peer else {
            return true;
        };
        let quota = self.quota;
        let bucket = self
            .peers
            .get_with(peer_key(peer), async move {
                Arc::new(DefaultDirectRateLimiter::direct(quota))
            })
            .await;
        bucket.check().is_ok()
    }
}

/// The key a peer is counted under: its IPv4 address, or the /64 network of
/// its IPv6 address (IPv4-mapped IPv6 addresses count as IPv4).
pub fn peer_key(peer: IpAddr) -> IpAddr {
    match peer {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let bits = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(bits.into())
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nz(n: u32) -> NonZeroU32 {
        NonZeroU32::new(n).expect("non-zero")
    }

    #[tokio::test]
    async fn a_peer_gets_its_burst_then_is_refused_while_others_are_not() {
        let budget = PeerBudget::per_minute(nz(3));
        let noisy: IpAddr = "192.0.2.1".parse().expect("ip");
        let quiet: IpAddr = "192.0.2.2".parse().expect("ip");
        for _ in 0..3 {
            assert!(budget.take(Some(noisy)).await);
        }
        // One cell comes back every 20 s: the next take right away fails.
        assert!(!budget.take(Some(noisy)).await);
        assert!(!budget.take(Some(noisy)).await);
        assert!(
            budget.take(Some(quiet)).await,
            "another peer has its own bucket"
        );
        assert!(budget.take(None).await, "no address, no limit");
    }

    #[tokio::test]
    async fn ipv6_peers_share_the_budget_of_their_64() {
        let budget = PeerBudget::per_minute(nz(1));
        let one: IpAddr = "2001:db8:1:2::1".parse().expect("ip");
        let sibling: IpAddr = "2001:db8:1:2:ffff::9".parse().expect("ip");
        let elsewhere: IpAddr = "2001:db8:1:3::1".parse().expect("ip");
        assert!(budget.take(Some(one)).await);
        assert!(!budget.take(Some(sibling)).await);
        assert!(budget.take(Some(elsewhere)).await);
    }

    #[test]
    fn mapped_ipv4_counts_as_ipv4() {
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().expect("ip");
        assert_eq!(peer_key(mapped), "192.0.2.7".parse::<IpAddr>().expect("ip"));
        assert_eq!(
            peer_key("2001:db8::5:6:7:8".parse().expect("ip")),
            "2001:db8::".parse::<IpAddr>().expect("ip")
        );
    }
}
