//! `kubectl-ferry`: the kubectl plugin binary. Installed on PATH, it runs as
//! `kubectl ferry get clusters`, `kubectl ferry get works -A`,
//! `kubectl ferry describe work NS/NAME`.
#![forbid(unsafe_code)]

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use kubectl_ferry::age::now;
use kubectl_ferry::cli::Cli;
use kubectl_ferry::run::run;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli, now()).await {
        Ok(text) => {
            let mut stdout = std::io::stdout().lock();
            match stdout
                .write_all(text.as_bytes())
                .and_then(|()| stdout.flush())
            {
                Ok(()) => ExitCode::SUCCESS,
                // `kubectl ferry get works -A | head` closes the pipe early:
                // not an error worth a message.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: cannot write the result: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        Err(error) => {
            // The causes say what "cannot connect" means (refused, TLS, DNS).
            let mut message = error.to_string();
            let mut cause = std::error::Error::source(&error);
            while let Some(inner) = cause {
                let text = inner.to_string();
                if !message.contains(&text) {
                    message.push_str(": ");
                    message.push_str(&text);
                }
                cause = inner.source();
            }
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}
