//! Compiles `ferry/v1/ferry.proto` with protox (pure Rust) so no system protoc is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = "ferry/v1/ferry.proto";
    println!("cargo:rerun-if-changed={proto}");
    let descriptors = protox::compile([proto], ["."])?;
    // Stubs only with the `grpc` feature, so a build without it needs no tonic.
    let grpc = std::env::var_os("CARGO_FEATURE_GRPC").is_some();
    tonic_prost_build::configure()
        .build_client(grpc)
        .build_server(grpc)
        // Small initial stream buffers: long-lived, mostly idle streams.
        .codec_path("crate::codec::SmallBufferCodec")
        .compile_fds(descriptors)?;
    Ok(())
}
