//! Where the hub API server reaches the admission webhook: a URL
//! (`--webhook-url`), or a Service of the hub cluster (`--webhook-service
//! NAMESPACE/NAME[:PORT]`), which is how an in-cluster hub registers itself
//! (the API server resolves the Service and checks the certificate against
//! `NAME.NAMESPACE.svc`).

use std::fmt;
use std::str::FromStr;

use k8s_openapi::api::admissionregistration::v1::ServiceReference;

use super::review::REVIEW_PATH;

/// Port of a Service reference without one: the webhook Service's HTTPS port,
/// as in Kubernetes' own default for `clientConfig.service.port`.
pub const DEFAULT_SERVICE_PORT: u16 = 443;

/// Longest DNS label (namespace and Service names are labels).
const MAX_LABEL_LEN: usize = 63;

/// A Service of the hub cluster fronting the webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceRef {
    /// The Service's namespace.
    pub namespace: String,
    /// The Service's name.
    pub name: String,
    /// The Service's port (not the pod's): [`DEFAULT_SERVICE_PORT`] when
    /// not given.
    pub port: u16,
}

impl ServiceRef {
    /// The name the API server checks the webhook certificate against:
    /// `NAME.NAMESPACE.svc`.
    pub fn dns_name(&self) -> String {
        format!("{}.{}.svc", self.name, self.namespace)
    }
}

impl fmt::Display for ServiceRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}:{}", self.namespace, self.name, self.port)
    }
}

/// Why a string is not `NAMESPACE/NAME[:PORT]`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServiceRefError {
    /// No `/` between namespace and name.
    #[error("{0:?} is not NAMESPACE/NAME[:PORT]: no '/'")]
    NoSlash(String),
    /// The namespace or the name is not a DNS-1123 label.
    #[error(
        "the {part} {value:?} is not a DNS-1123 label (1 to 63 lower-case letters, digits and '-', starting and ending with a letter or digit)"
    )]
    NotALabel {
        /// `namespace` or `name`.
        part: &'static str,
        /// The refused text.
        value: String,
    },
    /// The port is not a number from 1 to 65535.
    #[error("the port {0:?} is not a number from 1 to 65535")]
    BadPort(String),
}

fn check_label(part: &'static str, value: &str) -> Result<(), ServiceRefError> {
    let bytes = value.as_bytes();
    let allowed = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-';
    let ok = !bytes.is_empty()
        && bytes.len() <= MAX_LABEL_LEN
        && bytes.iter().all(allowed)
        && bytes.first() != Some(&b'-')
        && bytes.last() != Some(&b'-');
    if ok {
        Ok(())
    } else {
        Err(ServiceRefError::NotALabel {
            part,
            value: value.into(),
        })
    }
}

impl FromStr for ServiceRef {
    type Err = ServiceRefError;

    /// Parses `NAMESPACE/NAME[:PORT]`; fails on a missing `/`, a namespace or
    /// name that is not a DNS label, or a port outside 1..=65535.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (namespace, rest) = s
            .split_once('/')
            .ok_or_else(|| ServiceRefError::NoSlash(s.into()))?;
        let (name, port) = match rest.split_once(':') {
            Some((name, port)) => {
                let port = port
                    .parse::<u16>()
                    .ok()
                    .filter(|p| *p != 0)
                    .ok_or_else(|| ServiceRefError::BadPort(port.into()))?;
                (name, port)
            }
            None => (rest, DEFAULT_SERVICE_PORT),
        };
        check_label("namespace", namespace)?;
        check_label("name", name)?;
        Ok(Self {
            namespace: namespace.into(),
            name: name.into(),
            port,
        })
    }
}

/// Where the hub API server calls the webhook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebhookTarget {
    /// A base `https://` URL; the review path is appended.
    Url(String),
    /// A Service of the hub cluster; the review path is its `path`.
    Service(ServiceRef),
}

impl WebhookTarget {
    /// The `url` and `service` fields of the webhook's `clientConfig`
    /// (exactly one is set), both ending in the review path.
    pub fn client_config_fields(&self) -> (Option<String>, Option<ServiceReference>) {
        self.client_config_fields_for(REVIEW_PATH)
    }

    /// [`Self::client_config_fields`] ending in `path` instead.
    pub fn client_config_fields_for(
        &self,
        path: &str,
    ) -> (Option<String>, Option<ServiceReference>) {
        match self {
            Self::Url(base) => (Some(format!("{}{path}", base.trim_end_matches('/'))), None),
            Self::Service(service) => (
                None,
                Some(ServiceReference {
                    namespace: service.namespace.clone(),
                    name: service.name.clone(),
                    port: Some(i32::from(service.port)),
                    path: Some(path.into()),
                }),
            ),
        }
    }
}

impl fmt::Display for WebhookTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Url(url) => f.write_str(url),
            Self::Service(service) => write!(f, "service {service}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_reference_parses_with_and_without_its_port() {
        assert_eq!(
            "ferry/ferry-hub-webhook".parse(),
            Ok(ServiceRef {
                namespace: "ferry".into(),
                name: "ferry-hub-webhook".into(),
                port: 443,
            })
        );
        let with_port: ServiceRef = "ns-1/hook:9443".parse().expect("parses");
        assert_eq!(with_port.port, 9443);
        assert_eq!(with_port.dns_name(), "hook.ns-1.svc");
    }

    #[test]
    fn malformed_service_references_are_refused_with_the_reason() {
        assert_eq!(
            "ferry-hub".parse::<ServiceRef>(),
            Err(ServiceRefError::NoSlash("ferry-hub".into()))
        );
        for (input, part) in [
            ("/hook", "namespace"),
            ("Ferry/hook", "namespace"),
            ("ferry/", "name"),
            ("ferry/-hook", "name"),
            ("ferry/a/b", "name"),
        ] {
            assert!(
                matches!(input.parse::<ServiceRef>(), Err(ServiceRefError::NotALabel { part: p, .. }) if p == part),
                "{input}"
            );
        }
        for port in ["0", "65536", "https", ""] {
            assert_eq!(
                format!("ferry/hook:{port}").parse::<ServiceRef>(),
                Err(ServiceRefError::BadPort(port.into())),
                "{port}"
            );
        }
    }

    #[test]
    fn the_client_config_names_the_service_and_the_review_path() {
        let target = WebhookTarget::Service("ferry/hook:8443".parse().expect("parses"));
        let (url, service) = target.client_config_fields();
        assert_eq!(url, None);
        assert_eq!(
            service,
            Some(ServiceReference {
                namespace: "ferry".into(),
                name: "hook".into(),
                port: Some(8443),
                path: Some(REVIEW_PATH.into()),
            })
        );
        let (url, service) = WebhookTarget::Url("https://h:1/".into()).client_config_fields();
        assert_eq!(url, Some(format!("https://h:1{REVIEW_PATH}")));
        assert_eq!(service, None);
    }
}
