//! Compiles `ferry/v1/ferry.proto` with protox (pure Rust) so no system protoc is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "ferry/v1/ferry.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["."])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(descriptors)?;
    Ok(())
}
