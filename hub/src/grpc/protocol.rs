//! Which agent protocol versions this hub serves (version skew): its own
//! and the one before, so hubs upgrade first and agents follow.

use ferry_proto::{MIN_AGENT_PROTOCOL_VERSION, PROTOCOL_VERSION};
use tonic::Status;

/// An agent whose protocol version this hub does not serve. The hub serves
/// its own protocol version and the one before
/// ([`MIN_AGENT_PROTOCOL_VERSION`]); the message says which side to upgrade.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolSkew {
    /// The agent is more than one protocol version behind the hub.
    #[error(
        "agent speaks protocol {agent}, this hub (protocol {hub}) serves protocols \
         {min} to {hub}: upgrade the agent"
    )]
    AgentTooOld {
        /// The agent's protocol version.
        agent: u32,
        /// The oldest version the hub serves.
        min: u32,
        /// The hub's protocol version.
        hub: u32,
    },
    /// The agent is newer than the hub: hubs are upgraded first.
    #[error(
        "agent speaks protocol {agent}, this hub (protocol {hub}) serves protocols \
         {min} to {hub}: upgrade the hub first, then the agents"
    )]
    AgentTooNew {
        /// The agent's protocol version.
        agent: u32,
        /// The oldest version the hub serves.
        min: u32,
        /// The hub's protocol version.
        hub: u32,
    },
}

impl ProtocolSkew {
    /// The gRPC status an agent gets: FAILED_PRECONDITION, since retrying
    /// cannot help until one side is upgraded (the agent still retries with
    /// backoff, so the upgrade is picked up without a restart).
    pub fn to_status(&self) -> Status {
        Status::failed_precondition(self.to_string())
    }
}

/// Whether this hub serves an agent speaking `agent`: its own protocol
/// version or the one before. Fails with which side must be upgraded.
pub fn check_agent_protocol(agent: u32) -> Result<(), ProtocolSkew> {
    check_protocol(agent, MIN_AGENT_PROTOCOL_VERSION, PROTOCOL_VERSION)
}

fn check_protocol(agent: u32, min: u32, hub: u32) -> Result<(), ProtocolSkew> {
    if agent < min {
        Err(ProtocolSkew::AgentTooOld { agent, min, hub })
    } else if agent > hub {
        Err(ProtocolSkew::AgentTooNew { agent, min, hub })
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hub_serves_its_protocol_and_the_one_before() {
        // A hub on protocol 3 serves 2 and 3, refuses 1 and 4.
        assert_eq!(check_protocol(3, 2, 3), Ok(()));
        assert_eq!(check_protocol(2, 2, 3), Ok(()));
        let old = check_protocol(1, 2, 3).expect_err("too old");
        assert_eq!(
            old,
            ProtocolSkew::AgentTooOld {
                agent: 1,
                min: 2,
                hub: 3
            }
        );
        assert!(old.to_string().contains("upgrade the agent"), "{old}");
        let new = check_protocol(4, 2, 3).expect_err("too new");
        assert!(matches!(new, ProtocolSkew::AgentTooNew { agent: 4, .. }));
        assert!(new.to_string().contains("upgrade the hub first"), "{new}");
        assert_eq!(new.to_status().code(), tonic::Code::FailedPrecondition);
        assert!(new.to_status().message().contains("protocol 4"));
    }

    #[test]
    fn this_build_serves_its_own_agents_and_at_most_one_version_behind() {
        assert_eq!(check_agent_protocol(PROTOCOL_VERSION), Ok(()));
        assert!(check_agent_protocol(PROTOCOL_VERSION + 1).is_err());
        assert!(check_agent_protocol(MIN_AGENT_PROTOCOL_VERSION - 1).is_err());
    }
}
