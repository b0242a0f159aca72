// Generates the CSI v1 and plugin-registration bindings (clients and servers) with the
// workspace's one tonic/prost, as k8s-cri generates CRI's. protoc comes from
// scripts/install-deps.
fn main() -> Result<(), Box<dyn std::error::Error>> {
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_protos(
            &["proto/csi.proto", "proto/pluginregistration.proto"],
            &["proto/"],
        )?;
    Ok(())
}
