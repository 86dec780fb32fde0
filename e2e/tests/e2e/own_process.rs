//! Support, not a behaviour: runs a test in a process of its own. All
//! behaviours share this binary and run side by side, so a test that reads
//! this process's memory (`/proc/self/status`) would count every fleet
//! running beside it. Such a test calls [`alone`] first: in the test run it
//! starts this binary again with only that test, on one thread, and passes
//! or fails with it; in that child process it runs the body.

use std::process::Command;

/// Names the one test the child process was started for.
const ENV: &str = "FERRY_E2E_OWN_PROCESS";

/// True in the process started for test `name` of `module` (the caller's
/// `module_path!()`): the caller runs its body. Otherwise runs that process,
/// copies its output into this test's, panics unless exactly that test ran
/// and passed, and returns false: the caller returns.
pub async fn alone(module: &str, name: &str) -> bool {
    // libtest names tests by their path below the crate root.
    let module = module.split_once("::").map_or(module, |(_, rest)| rest);
    let test = format!("{module}::{name}");
    if std::env::var(ENV).is_ok_and(|t| t == test) {
        return true;
    }
    let exe = std::env::current_exe().expect("the path of this test binary");
    let child_test = test.clone();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(exe)
            .args([
                child_test.as_str(),
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(ENV, &child_test)
            .output()
    })
    .await
    .expect("the task running the child test")
    .unwrap_or_else(|e| panic!("starting this test binary again for {test}: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    print!("{stdout}");
    eprint!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(
        output.status.success() && stdout.contains("test result: ok. 1 passed"),
        "{test} in its own process: {}",
        output.status
    );
    false
}
