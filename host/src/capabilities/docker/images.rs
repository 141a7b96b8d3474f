//! Images built locally FROM scratch from static binaries embedded in the
//! host (the helper agent, the demo service), tagged by their content:
//! a new binary gets a new image, and nothing is ever pulled.

use bollard::Docker;
use bollard::query_parameters::BuildImageOptionsBuilder;
use faultline_plugin_runtime::capability::CapResult;
use faultline_plugin_runtime::model::CapabilityError;
use futures_util::StreamExt;

use super::{CALL_TIMEOUT, timed};

include!(concat!(env!("OUT_DIR"), "/static_binaries.rs"));

fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x100000001b3))
}

/// A build context: a Dockerfile and the binary as `/<name>`, its entry point.
fn build_context(name: &str, binary: &[u8]) -> std::io::Result<Vec<u8>> {
    let dockerfile = format!("FROM scratch\nCOPY {name} /{name}\nENTRYPOINT [\"/{name}\"]\n");
    let mut archive = tar::Builder::new(Vec::new());
    for (path, bytes, mode) in [("Dockerfile", dockerfile.as_bytes(), 0o644), (name, binary, 0o755)] {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(mode);
        header.set_cksum();
        archive.append_data(&mut header, path, bytes)?;
    }
    archive.into_inner()
}

/// The image `<name>:<version>-<content hash>` holding `binary`, built if
/// this engine lacks it; returns its tag.
pub async fn scratch_image(client: &Docker, name: &str, binary: &[u8]) -> CapResult<String> {
    let tag = format!("{name}:{}-{:012x}", env!("CARGO_PKG_VERSION"), fnv(binary) & 0xffff_ffff_ffff);
    if client.inspect_image(&tag).await.is_ok() {
        return Ok(tag);
    }
    let context = build_context(name, binary).map_err(|e| CapabilityError::Failed(format!("packing the {name} image: {e}")))?;
    let options = BuildImageOptionsBuilder::default().t(&tag).rm(true).forcerm(true).build();
    let build = async {
        let mut progress = std::pin::pin!(client.build_image(options, None, Some(bollard::body_full(context.into()))));
        while let Some(step) = progress.next().await {
            if let Some(error) = step?.error {
                return Err(bollard::errors::Error::DockerStreamError { error });
            }
        }
        Ok(())
    };
    timed(&format!("building the {name} image"), CALL_TIMEOUT, build).await?;
    tracing::info!(image = %tag, "built an image from scratch");
    Ok(tag)
}
