//! The kubelet's garbage collection flags, on `berth server` and `berth agent`
//! alike (upstream's names and defaults).

use anyhow::{Result, anyhow};
use berth_kubelet::eviction::signals::parse_go_duration;
use berth_kubelet::images::gc::ImageGcPolicy;
use berth_kubelet::runtime::gc::ContainerGcPolicy;

#[derive(clap::Args, Debug, Clone)]
pub struct GcArgs {
    /// Disk usage (percent of the image filesystem) at which unused images are removed; 100 turns it off.
    #[arg(long, default_value_t = 85, allow_negative_numbers = true)]
    pub image_gc_high_threshold: i32,
    /// Disk usage (percent) image garbage collection frees down to.
    #[arg(long, default_value_t = 80, allow_negative_numbers = true)]
    pub image_gc_low_threshold: i32,
    /// How long an unused image is kept at least, e.g. `2m0s`.
    #[arg(long, default_value = "2m0s")]
    pub minimum_image_ttl_duration: String,
    /// Unused images older than this are removed, e.g. `24h`; `0s` turns it off.
    #[arg(long, default_value = "0s")]
    pub image_maximum_gc_age: String,
    /// How long a dead container is kept at least.
    #[arg(long, default_value = "0s")]
    pub minimum_container_ttl_duration: String,
    /// Dead instances kept per pod and container name (negative: all).
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub maximum_dead_containers_per_container: i32,
    /// Dead containers kept on the node (negative: no limit).
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    pub maximum_dead_containers: i32,
}

fn duration(flag: &str, value: &str) -> Result<std::time::Duration> {
    parse_go_duration(value).ok_or_else(|| anyhow!("--{flag}: invalid duration {value:?}"))
}

impl GcArgs {
    /// The container and image policies, validated as upstream's.
    pub fn policies(&self) -> Result<(ContainerGcPolicy, ImageGcPolicy)> {
        let containers = ContainerGcPolicy {
            min_age: duration(
                "minimum-container-ttl-duration",
                &self.minimum_container_ttl_duration,
            )?,
            max_per_pod_container: self.maximum_dead_containers_per_container,
            max_containers: self.maximum_dead_containers,
        };
        let images = ImageGcPolicy {
            high_threshold_percent: self.image_gc_high_threshold,
            low_threshold_percent: self.image_gc_low_threshold,
            min_age: duration(
                "minimum-image-ttl-duration",
                &self.minimum_image_ttl_duration,
            )?,
            max_age: duration("image-maximum-gc-age", &self.image_maximum_gc_age)?,
        };
        images
            .validate()
            .map_err(|e| anyhow!("image garbage collection: {e}"))?;
        Ok((containers, images))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        gc: GcArgs,
    }

    fn policies(args: &[&str]) -> Result<(ContainerGcPolicy, ImageGcPolicy)> {
        let mut all = vec!["berth"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all)?.gc.policies()
    }

    #[test]
    fn flags_default_and_validate_as_upstream() {
        let (c, i) = policies(&[]).unwrap();
        assert_eq!(c, ContainerGcPolicy::default());
        assert_eq!(i, ImageGcPolicy::default());
        let (c, i) = policies(&[
            "--image-gc-high-threshold=90",
            "--image-gc-low-threshold=50",
            "--minimum-image-ttl-duration=30s",
            "--image-maximum-gc-age=1h",
            "--maximum-dead-containers-per-container=3",
            "--maximum-dead-containers",
            "-1",
            "--minimum-container-ttl-duration=1m",
        ])
        .unwrap();
        assert_eq!(
            (i.high_threshold_percent, i.low_threshold_percent),
            (90, 50)
        );
        assert_eq!(i.min_age.as_secs(), 30);
        assert_eq!(i.max_age.as_secs(), 3600);
        assert_eq!(c.max_per_pod_container, 3);
        assert_eq!(c.max_containers, -1);
        assert_eq!(c.min_age.as_secs(), 60);
        // (flags, error)
        let rows = [
            (
                vec!["--image-gc-high-threshold=70"],
                "image garbage collection: LowThresholdPercent 80 can not be higher than HighThresholdPercent 70",
            ),
            (
                vec!["--image-gc-high-threshold=101"],
                "image garbage collection: invalid HighThresholdPercent 101, must be in range [0-100]",
            ),
            (
                vec!["--minimum-image-ttl-duration=soon"],
                "--minimum-image-ttl-duration: invalid duration \"soon\"",
            ),
        ];
        for (args, want) in rows {
            let err = policies(&args).unwrap_err();
            assert_eq!(err.to_string(), want, "{args:?}");
        }
    }
}
