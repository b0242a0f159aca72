// Generates the device plugin API v1beta1 (client and server of both services)
// with the workspace's one tonic/prost, as crates/csi generates CSI. protoc comes
// from scripts/install-deps.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_protos(&["proto/deviceplugin/v1beta1/api.proto"], &["proto/"])?;
    Ok(())
}
