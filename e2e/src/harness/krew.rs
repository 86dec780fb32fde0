//! krew, kubectl's plugin manager, and its manifest validator
//! (`validate-krew-manifest`, what krew's plugin index runs on every
//! submitted manifest), for the krew plugin test: built from the krew Go
//! module (`sigs.k8s.io/krew`, version [`KREW_VERSION`]) with `go install`
//! and cached in the ferry cache directory, as Helm and promtool are.
//! Nothing is vendored.

use std::path::PathBuf;

use crate::harness::go_tool::{GoTool, GoToolError, ensure_go_tool};

/// The krew module version both commands are built from.
pub const KREW_VERSION: &str = "v0.4.3";

const KREW: GoTool = GoTool {
    binary: "krew",
    package: "sigs.k8s.io/krew/cmd/krew",
    version: KREW_VERSION,
};

const VALIDATOR: GoTool = GoTool {
    binary: "validate-krew-manifest",
    package: "sigs.k8s.io/krew/cmd/validate-krew-manifest",
    version: KREW_VERSION,
};

/// The cached `krew` and `validate-krew-manifest`, built first when the
/// cache lacks them. Blocking; fails when a build does.
pub fn ensure_krew() -> Result<(PathBuf, PathBuf), GoToolError> {
    Ok((ensure_go_tool(KREW)?, ensure_go_tool(VALIDATOR)?))
}
