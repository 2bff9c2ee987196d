//! Generates the CSI gRPC code (`src/csi/proto.rs` includes it) from `proto/csi.proto`, with
//! protox parsing the file in pure Rust: building storch needs no system `protoc`.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/csi.proto");
    let descriptors = protox::compile(["proto/csi.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_server(true)
        // The conformance suite (tests/integration/csi) talks to the server through the clients.
        .build_client(true)
        .compile_fds(descriptors)?;
    Ok(())
}
