//! A work's sealed entries opened into the Secrets they carry, before the
//! pass applies them: off the async runtime (each key tried costs an X25519
//! agreement, bounded by the entry's recipient bound), with the keys held
//! when the pass began.

use ferry_semantics::ManifestIdentity;
use ferry_semantics::sealing::{OpenError, SealedEnvelope, is_sealed, open};
use serde_json::Value;

use super::Keyring;

/// How long a pass waits for keys it does not hold yet.
const LOAD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// What became of one sealed entry.
#[derive(Debug, Clone)]
pub enum Sealed {
    /// Opened: the manifest now holds the Secret it carried.
    Opened,
    /// Not opened, and why; the manifest still holds the entry.
    Refused(OpenError),
}

/// Opens every sealed entry among `parsed` in place, with `keyring`'s
/// keys, and says per manifest what became of it (None: not sealed).
pub async fn open_sealed<E>(
    keyring: &Keyring,
    parsed: &mut [Result<(Value, ManifestIdentity), E>],
) -> Vec<Option<Sealed>> {
    let mut outcomes = vec![None; parsed.len()];
    let sealed: Vec<(usize, SealedEnvelope)> = parsed
        .iter()
        .enumerate()
        .filter_map(|(index, p)| match p {
            Ok((value, _)) if is_sealed(value) => {
                SealedEnvelope::parse(value).ok().map(|e| (index, e))
            }
            _ => None,
        })
        .collect();
    if sealed.is_empty() {
        return outcomes;
    }
    if keyring.held().await.is_empty() {
        // The session's start could not read the keys (the spoke was
        // away): read them now rather than refuse until the next session.
        if let Ok(Err(error)) = tokio::time::timeout(LOAD_TIMEOUT, keyring.refresh()).await {
            tracing::warn!(%error, "cannot read the sealing keys");
        }
    }
    let keys: Vec<(String, age::x25519::Identity)> = keyring
        .held()
        .await
        .iter()
        .map(|k| (k.id.clone(), k.identity.clone()))
        .collect();
    let indices: Vec<usize> = sealed.iter().map(|(index, _)| *index).collect();
    let opened = tokio::task::spawn_blocking(move || {
        sealed
            .into_iter()
            .map(|(index, envelope)| (index, open(&envelope, &keys)))
            .collect::<Vec<_>>()
    })
    .await
    // A panic while opening leaves every entry unopened (never applied as
    // an envelope), with the reason.
    .unwrap_or_else(|panic| {
        indices
            .into_iter()
            .map(|index| {
                (
                    index,
                    Err(OpenError::Malformed(format!("opening failed: {panic}"))),
                )
            })
            .collect()
    });
    for (index, result) in opened {
        outcomes[index] = Some(match result {
            Ok(secret) => {
                if let Some(Ok((value, _))) = parsed.get_mut(index) {
                    *value = secret;
                }
                Sealed::Opened
            }
            Err(error) => Sealed::Refused(error),
        });
    }
    outcomes
}
